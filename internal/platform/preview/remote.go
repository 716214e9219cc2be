package preview

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/devtool/devtool/internal/platform/api"
	"github.com/devtool/devtool/internal/platform/ingress"
)

// The ingress runs in pods of its own: it asks the platform to wake a sleeping preview with
// POST /api/v1/internal/wake/{namespace}, authenticated by WakeHeader: "<unix time>.<hex
// HMAC-SHA256 of "wake\n<namespace>\n<unix time>" with the wake key>" (a key both have mounted;
// valid for a minute either side). The platform scales the preview back up and answers at once;
// the ingress waits for a ready endpoint itself.
const (
	WakeHeader = "X-Devtool-Wake"
	WakePath   = api.Prefix + "/internal/wake/"
	wakeSkew   = time.Minute
)

func wakeMAC(key []byte, ns, ts string) string {
	m := hmac.New(sha256.New, key)
	fmt.Fprintf(m, "wake\n%s\n%s", ns, ts)
	return hex.EncodeToString(m.Sum(nil))
}

// ErrBadWake is a wake request without a valid WakeHeader.
var ErrBadWake = errors.New("the wake request is not signed with the platform's wake key, or is too old")

// CheckWake checks a wake request's header for namespace at now.
func CheckWake(key []byte, header, namespace string, now time.Time) error {
	ts, mac, ok := strings.Cut(header, ".")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if len(key) == 0 || !ok || err != nil {
		return ErrBadWake
	}
	if d := now.Sub(time.Unix(sec, 0)); d > wakeSkew || d < -wakeSkew {
		return ErrBadWake
	}
	if subtle.ConstantTimeCompare([]byte(mac), []byte(wakeMAC(key, namespace, ts))) != 1 {
		return ErrBadWake
	}
	return nil
}

// WakeRemote scales a sleeping preview back up without waiting (the ingress waits for its
// endpoints); a namespace that is no sleeping preview's is nothing to do.
func (m *Manager) WakeRemote(ctx context.Context, namespace string) error {
	p := m.cached(namespace)
	if p == nil || p.Namespace != namespace || p.Status == api.PreviewDestroying {
		return nil
	}
	if !p.Sleeping {
		m.Touch(ctx, p.Name)
		return nil
	}
	_, err := m.wakeWorkloads(ctx, p)
	return err
}

// RemoteWaker is the ingress's Waker in its own pods: it asks the platform (URL: its in-cluster
// address, https://devtool-platform.<namespace>.svc) to wake a preview's namespace.
type RemoteWaker struct {
	URL    string
	Key    []byte
	Client *http.Client
	Now    func() time.Time
}

// Wake implements ingress.Waker.
func (w *RemoteWaker) Wake(ctx context.Context, b ingress.Backend) error {
	now := time.Now
	if w.Now != nil {
		now = w.Now
	}
	ts := strconv.FormatInt(now().Unix(), 10)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, strings.TrimSuffix(w.URL, "/")+WakePath+url.PathEscape(b.Namespace), nil)
	if err != nil {
		return err
	}
	req.Header.Set(WakeHeader, ts+"."+wakeMAC(w.Key, b.Namespace, ts))
	resp, err := w.Client.Do(req)
	if err != nil {
		return fmt.Errorf("asking the platform to wake %s: %w", b.Namespace, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	if resp.StatusCode != http.StatusNoContent && resp.StatusCode != http.StatusOK {
		return fmt.Errorf("the platform did not wake %s: %s: %s", b.Namespace, resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

var _ ingress.Waker = (*RemoteWaker)(nil)
