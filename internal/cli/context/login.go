package contextcmd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"

	"github.com/devtool/devtool/internal/cli/context/prompt"
	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/client"
)

// maxPasswordBytes is the platform's limit of a password.
const maxPasswordBytes = 1024

// inCI reports whether CI is set (any value but "", "0" and "false").
func inCI(getenv func(string) string) bool {
	v := strings.ToLower(strings.TrimSpace(getenv("CI")))
	return v != "" && v != "0" && v != "false"
}

// otherWays is the hint of a login that cannot ask anything.
func otherWays(url string) string {
	return fmt.Sprintf("give a token: 'devtool context use %s --token <token>' or %s (with %s, no saved context is needed); "+
		"or a password from a pipe: 'devtool context use %s --user <name> --password-stdin'; or --device to log in with a code on another device",
		url, api.EnvToken, api.EnvURL, url)
}

// canBrowse says why the browser login cannot run here (nil when it can): it never runs with CI set
// or without a terminal.
func canBrowse(opts *Options, url string) error {
	switch {
	case inCI(opts.Getenv):
		return &errs.AuthError{Err: fmt.Errorf("logging in to %s needs a token: CI is set, so no browser is opened and nothing is asked", url), Hint: otherWays(url)}
	case !opts.IO.CanPrompt():
		return &errs.AuthError{Err: fmt.Errorf("logging in to %s needs a token: there is no terminal, so no browser is opened and nothing is asked", url), Hint: otherWays(url)}
	}
	return nil
}

// login gets a new API token the way the flags say (see loginPlatform).
func login(ctx context.Context, opts *Options, pc *client.Client, info *api.Info, url string) (string, error) {
	m := info.Login
	tooOld := func(what string) error {
		return &errs.AuthError{Err: fmt.Errorf("the platform %s is too old for %s (version %s)", url, what, info.Version),
			Hint: fmt.Sprintf("log in with a token: 'devtool context use %s --token <token>', or ask its administrator to upgrade it", url)}
	}
	host, _ := os.Hostname()
	switch {
	case opts.User != "":
		if m == nil || !m.Password {
			return "", tooOld("password login")
		}
		var password string
		var err error
		if opts.PasswordStdin {
			if password, err = prompt.ReadSecret(opts.IO.In, maxPasswordBytes); err != nil {
				return "", fmt.Errorf("--password-stdin: reading the password: %w", err)
			}
		} else {
			if inCI(opts.Getenv) || !opts.IO.CanPrompt() {
				why := "there is no terminal to ask it on"
				if inCI(opts.Getenv) {
					why = "CI is set, so nothing is asked"
				}
				return "", &errs.AuthError{Err: fmt.Errorf("logging in to %s as %s needs the password: %s", url, opts.User, why),
					Hint: fmt.Sprintf("pipe it: 'devtool context use %s --user %s --password-stdin' (never on the command line), or give a token with --token or %s", url, opts.User, api.EnvToken)}
			}
			if password, err = prompt.Password(ctx, opts.IO.In, opts.IO.ErrOut, fmt.Sprintf("Password of %s at %s: ", opts.User, url)); err != nil {
				return "", err
			}
		}
		if password == "" {
			return "", &errs.AuthError{Err: errors.New("the password is empty"), Hint: "give the account's password"}
		}
		t, err := pc.PasswordLogin(ctx, opts.User, password, "devtool CLI on "+host)
		if err != nil {
			return "", err
		}
		return t.Token, nil
	case opts.Device:
		if m == nil || !m.Device {
			return "", tooOld("device login")
		}
		return pc.DeviceLogin(ctx, "devtool CLI on "+host, func(code, uri, complete string) {
			fmt.Fprintf(opts.IO.ErrOut, "To log in, open %s on any device and enter the code %s\n", uri, code)
			if complete != "" {
				fmt.Fprintf(opts.IO.ErrOut, "(or open %s)\n", complete)
			}
			fmt.Fprintln(opts.IO.ErrOut, "Waiting for the login to be approved...")
		})
	}
	if err := canBrowse(opts, url); err != nil {
		return "", err
	}
	if m == nil || !m.Browser {
		if m != nil && m.Password {
			// Only a password: ask for the user name, then the password.
			user, err := prompt.Line(ctx, opts.IO.In, opts.IO.ErrOut, fmt.Sprintf("User name at %s: ", url))
			if err != nil {
				return "", err
			}
			opts.User = user
			return login(ctx, opts, pc, info, url)
		}
		return "", tooOld("browser login")
	}
	return pc.BrowserLogin(ctx, func(authURL string) {
		if err := openBrowser(opts.Getenv, authURL); err != nil {
			fmt.Fprintf(opts.IO.ErrOut, "No browser could be opened (%v). Open this address to log in:\n  %s\n", err, authURL)
		} else {
			fmt.Fprintf(opts.IO.ErrOut, "Opening a browser to log in. If none opens, open this address:\n  %s\n", authURL)
		}
		fmt.Fprintln(opts.IO.ErrOut, "Waiting for the browser (Ctrl-C to stop; --user NAME logs in with a password, --device with a code)...")
	})
}

// openBrowser starts the system's browser on url: $BROWSER when set ("none" opens nothing), else
// xdg-open (with a display), open (macOS) or the URL handler (Windows). It does not wait for it.
func openBrowser(getenv func(string) string, url string) error {
	var name string
	var args []string
	switch b := strings.TrimSpace(getenv("BROWSER")); {
	case b == "none":
		return errors.New("BROWSER=none")
	case b != "":
		f := strings.Fields(b)
		name, args = f[0], append(f[1:], url)
	case runtime.GOOS == "darwin":
		name, args = "open", []string{url}
	case runtime.GOOS == "windows":
		name, args = "rundll32", []string{"url.dll,FileProtocolHandler", url}
	default:
		if getenv("DISPLAY") == "" && getenv("WAYLAND_DISPLAY") == "" {
			return errors.New("no display")
		}
		name, args = "xdg-open", []string{url}
	}
	cmd := exec.Command(name, args...)
	if err := cmd.Start(); err != nil {
		return err
	}
	go func() { _ = cmd.Wait() }() // reaped when it exits (a browser launcher returns at once)
	return nil
}
