package client

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"html"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"golang.org/x/oauth2"

	"github.com/devtool/devtool/internal/errs"
	"github.com/devtool/devtool/internal/platform/api"
)

// PasswordLogin exchanges a user name and password for a new API token (POST /api/v1/login). A
// refusal is an errs.AuthError (exit 4) naming no reason: the platform gives none.
//
// A 429 (the platform checks too many logins at once: each is a deliberately slow hash) is tried
// again after its Retry-After (at most 10 s), up to 3 times in all.
func (c *Client) PasswordLogin(ctx context.Context, user, password, tokenName string) (*api.Token, error) {
	var out api.Token
	var err error
	for attempt := 1; ; attempt++ {
		_, err = c.do(ctx, http.MethodPost, api.Prefix+"/login", api.LoginRequest{User: user, Password: password, TokenName: tokenName}, &out)
		var ae *APIError
		if attempt >= 3 || !errors.As(err, &ae) || ae.Status != http.StatusTooManyRequests {
			break
		}
		wait := 2 * time.Second
		if n, perr := strconv.Atoi(ae.RetryAfter); perr == nil && n > 0 {
			wait = min(time.Duration(n)*time.Second, 10*time.Second)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	if err != nil {
		var ae *errs.AuthError
		if errors.As(err, &ae) {
			ae.Hint = "check the user name and password; after repeated failures the account is locked for a while (an admin can unlock it)"
		}
		return nil, err
	}
	if out.Token == "" {
		return nil, fmt.Errorf("platform %s: the login answered no token", c.urlString)
	}
	return &out, nil
}

// ChangePassword sets the caller's password (PUT /api/v1/me/password).
func (c *Client) ChangePassword(ctx context.Context, current, next string) error {
	_, err := c.do(ctx, http.MethodPut, api.Prefix+"/me/password", api.PasswordChange{Current: current, New: next}, nil)
	return err
}

func (c *Client) oauthConfig(redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: api.CLIClientID, RedirectURL: redirect, Endpoint: oauth2.Endpoint{
		AuthURL: c.urlString + api.AuthorizePath, TokenURL: c.urlString + api.TokenPath,
		DeviceAuthURL: c.urlString + api.DeviceAuthPath, AuthStyle: oauth2.AuthStyleInParams}}
}

func (c *Client) oauthContext(ctx context.Context) context.Context {
	hc := *c.http
	hc.Timeout = c.timeout
	return context.WithValue(ctx, oauth2.HTTPClient, &hc)
}

// oauthError makes an OAuth error answer a devtool error: a refusal is an AuthError (exit 4).
func (c *Client) oauthError(err error, what string) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) && re.ErrorCode != "" {
		msg := re.ErrorCode
		if re.ErrorDescription != "" {
			msg += ": " + printable(re.ErrorDescription, 200)
		}
		return &errs.AuthError{Err: fmt.Errorf("platform %s refused the %s (%s)", c.urlString, what, msg),
			Hint: fmt.Sprintf("run 'devtool context use %s' again, or log in with a token: --token <token>", c.urlString)}
	}
	return fmt.Errorf("platform %s: %s: %w", c.urlString, what, err)
}

// BrowserLogin is the OAuth 2.0 authorization code flow with PKCE (S256) and a loopback redirect
// (RFC 8252): it listens on 127.0.0.1 on a random port, hands the authorization address to open (a
// browser, or the user), waits for the redirect with the right state, and exchanges the code for
// an API token. The listener is closed on every way out, Ctrl-C (ctx) included.
func (c *Client) BrowserLogin(ctx context.Context, open func(authURL string)) (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("listening on 127.0.0.1 for the browser's answer: %w", err)
	}
	redirect := fmt.Sprintf("http://%s/callback", ln.Addr())
	cfg := c.oauthConfig(redirect)
	verifier := oauth2.GenerateVerifier()
	sb := make([]byte, 24)
	if _, err := rand.Read(sb); err != nil {
		ln.Close()
		return "", err
	}
	state := base64.RawURLEncoding.EncodeToString(sb)
	type result struct {
		code string
		err  error
	}
	got := make(chan result, 1)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /callback", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("state") != state {
			// Not this login's answer (another tab, or a forged request): ignored, still waiting.
			http.Error(w, "This is not the answer devtool is waiting for (state does not match).", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		res := result{code: q.Get("code")}
		msg := "devtool is logged in. You can close this window and return to your terminal."
		if e := q.Get("error"); e != "" || res.code == "" {
			res = result{err: &errs.AuthError{Err: fmt.Errorf("platform %s refused the browser login (%s)", c.urlString,
				printable(e+" "+q.Get("error_description"), 200)), Hint: "run the login again, or log in with --token <token>"}}
			msg = "The login was refused: " + q.Get("error") + ". You can close this window."
		}
		fmt.Fprintf(w, "<!doctype html><title>devtool</title><p>%s</p>", html.EscapeString(msg))
		select {
		case got <- res:
		default:
		}
	})
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan struct{})
	go func() { _ = srv.Serve(ln); close(done) }()
	defer func() {
		sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
		<-done
	}()
	open(cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier)))
	var res result
	select {
	case res = <-got:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	if res.err != nil {
		return "", res.err
	}
	tok, err := cfg.Exchange(c.oauthContext(ctx), res.code, oauth2.VerifierOption(verifier))
	if err != nil {
		return "", c.oauthError(err, "browser login")
	}
	return tok.AccessToken, nil
}

// DeviceLogin is the device authorization flow (RFC 8628): show gets the code and the addresses to
// give the person, then the platform is polled until the login is approved, denied or expires.
func (c *Client) DeviceLogin(ctx context.Context, clientName string, show func(userCode, uri, complete string)) (string, error) {
	cfg := c.oauthConfig("")
	octx := c.oauthContext(ctx)
	da, err := cfg.DeviceAuth(octx, oauth2.SetAuthURLParam("client_name", clientName))
	if err != nil {
		return "", c.oauthError(err, "device login")
	}
	if _, err := url.Parse(da.VerificationURI); err != nil || da.UserCode == "" {
		return "", fmt.Errorf("platform %s: the device login answer has no code or address", c.urlString)
	}
	show(printable(da.UserCode, 20), printable(da.VerificationURI, 300), printable(da.VerificationURIComplete, 400))
	tok, err := cfg.DeviceAccessToken(octx, da)
	if err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return "", &errs.AuthError{Err: errors.New("the device login expired before it was approved"), Hint: "run it again"}
		}
		return "", c.oauthError(err, "device login")
	}
	return tok.AccessToken, nil
}
