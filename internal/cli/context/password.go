package contextcmd

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/cmdutil"
	"github.com/devtool/devtool/internal/contexts"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/iostreams"
)

// PasswordOptions are the inputs of `devtool context password`.
type PasswordOptions struct {
	IO            *iostreams.IOStreams
	Getenv        func(string) string
	Context       string // --context; "": the current one
	PasswordStdin bool
}

// NewPasswordCmd builds `devtool context password`: change your own password on the platform of
// a context (PUT /api/v1/me/password). There is no password flag, as for the login.
func NewPasswordCmd(f *cmdutil.Factory, runF func(context.Context, *PasswordOptions) error) *cobra.Command {
	opts := &PasswordOptions{IO: f.IOStreams, Getenv: f.Getenv}
	cmd := &cobra.Command{
		Use:   "password",
		Short: "Change your password on the platform of a context",
		Long: `Change the password you log in with on the platform of the current context (or --context).
On a terminal it asks, without echo, for the current password and twice for the new one. For
scripts, --password-stdin reads two lines from standard input: the current password, then the new
one. An account made without a password (a token or single sign-on only) sets its first one without
the current. Your API tokens and web sessions stay valid.`,
		Example: `  devtool context password
  printf '%s\n%s\n' "$OLD" "$NEW" | devtool context password --password-stdin`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if runF != nil {
				return runF(cmd.Context(), opts)
			}
			return runPassword(cmd.Context(), opts)
		},
	}
	cmd.Flags().StringVarP(&opts.Context, "context", "c", "", "context whose platform to change the password on (default: the current context)")
	cmd.Flags().BoolVar(&opts.PasswordStdin, "password-stdin", false, "read the current and the new password, one a line, from standard input")
	return cmd
}

func runPassword(ctx context.Context, opts *PasswordOptions) error {
	sel, err := (&contexts.Resolver{Getenv: opts.Getenv}).Select(contexts.Flags{Context: opts.Context})
	if err != nil {
		return err
	}
	c := sel.Context
	if c == nil || !c.IsDevtool {
		return cmdutil.WithHint(errors.New("context password works on a platform context only"),
			"select one with 'devtool context use https://<platform>' or name it with --context")
	}
	current, next, err := readPasswords(ctx, opts, c.Name)
	if err != nil {
		return err
	}
	pc, err := contexts.PlatformClient(c)
	if err != nil {
		return err
	}
	defer pc.Close()
	if err := pc.ChangePassword(ctx, current, next); err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.ErrOut, "Password changed on %s.\n", c.Name)
	return nil
}

// readPasswords gets the current and the new password: two lines of a pipe (--password-stdin), or
// asked without echo on a terminal (the new one twice). With CI set or without a terminal nothing
// is asked.
func readPasswords(ctx context.Context, opts *PasswordOptions, where string) (current, next string, err error) {
	if opts.PasswordStdin {
		r := bufio.NewReader(io.LimitReader(opts.IO.In, 2*maxPasswordBytes+4))
		lines := make([]string, 0, 2)
		for len(lines) < 2 {
			line, err := r.ReadString('\n')
			if err != nil && !(errors.Is(err, io.EOF) && line != "") {
				return "", "", cmdutil.FlagErrorf("--password-stdin: give two lines, the current password then the new one (%d read)", len(lines))
			}
			line = strings.TrimRight(line, "\r\n")
			if len(line) > maxPasswordBytes {
				return "", "", cmdutil.FlagErrorf("--password-stdin: a password of more than %d bytes", maxPasswordBytes)
			}
			lines = append(lines, line)
		}
		current, next = lines[0], lines[1]
	} else {
		if inCI(opts.Getenv) || !opts.IO.CanPrompt() {
			why := "there is no terminal"
			if inCI(opts.Getenv) {
				why = "CI is set"
			}
			return "", "", cmdutil.FlagErrorf("changing the password needs it typed on a terminal, but %s: pipe the current and the new password, one a line, with --password-stdin", why)
		}
		if current, err = prompt.Password(ctx, opts.IO.In, opts.IO.ErrOut, fmt.Sprintf("Current password at %s (empty if you have none): ", where)); err != nil {
			return "", "", err
		}
		if next, err = prompt.Password(ctx, opts.IO.In, opts.IO.ErrOut, "New password: "); err != nil {
			return "", "", err
		}
		again, err := prompt.Password(ctx, opts.IO.In, opts.IO.ErrOut, "New password again: ")
		if err != nil {
			return "", "", err
		}
		if again != next {
			return "", "", &errs.InputError{Err: errors.New("the two new passwords differ: nothing was changed")}
		}
	}
	if next == "" {
		return "", "", cmdutil.FlagErrorf("the new password is empty")
	}
	return current, next, nil
}
