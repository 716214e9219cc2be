package filesync

import (
	"crypto/rand"
	"encoding/json"
	"net"
	"net/http"
	"testing"
	"time"
)

func TestServeStatus(t *testing.T) {
	p := newPair(t, ClientOptions{})
	write(t, p.local, "a", "x")
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	done := make(chan error, 1)
	go func() { done <- ServeStatus(ln, "devtool", "s3cret", p.c) }()
	url := "http://" + ln.Addr().String() + "/"
	for _, cred := range [][2]string{{"", ""}, {"devtool", "wrong"}, {"other", "s3cret"}} {
		req, _ := http.NewRequest("GET", url, nil)
		if cred[0] != "" {
			req.SetBasicAuth(cred[0], cred[1])
		}
		resp, err := http.DefaultClient.Do(req)
		must(t, err)
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized {
			t.Errorf("credentials %v: status %d", cred, resp.StatusCode)
		}
	}
	req, _ := http.NewRequest("GET", url, nil)
	req.SetBasicAuth("devtool", "s3cret")
	resp, err := http.DefaultClient.Do(req)
	must(t, err)
	var got struct {
		Status
		Percent float64 `json:"percent"`
	}
	must(t, json.NewDecoder(resp.Body).Decode(&got))
	resp.Body.Close()
	if got.Percent != 100 || !got.Synced || len(got.Folders) != 1 || got.Folders[0].Files != 1 {
		t.Fatalf("status %+v", got)
	}
	http.DefaultClient.CloseIdleConnections()
	ln.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("ServeStatus did not return after its listener closed")
	}
}

func TestStatusPercent(t *testing.T) {
	for _, c := range []struct {
		st   Status
		want float64
	}{
		{Status{}, 0},
		{Status{Folders: []FolderStatus{{Files: 0, Percent: 0}}}, 0},
		{Status{Folders: []FolderStatus{{Files: 0, Percent: 100}}}, 100},
		{Status{Folders: []FolderStatus{{Files: 10, Pending: 5, Percent: 50}, {Files: 30, Percent: 100}}}, 87.5},
		{Status{Folders: []FolderStatus{{Files: 10, Percent: 0}, {Files: 0, Percent: 0}}}, 0},
	} {
		if got := c.st.Percent(); got != c.want {
			t.Errorf("%+v: %v, want %v", c.st, got, c.want)
		}
	}
}

// TestStatusCountsStreamBytes: Status counts the stream's bytes both ways (what devtool ui shows),
// at least a file's compressed-or-not size in the direction it travelled.
func TestStatusCountsStreamBytes(t *testing.T) {
	p := newPair(t, ClientOptions{})
	big := make([]byte, 256<<10)
	_, _ = rand.Read(big) // nothing for zstd to squeeze

	write(t, p.local, "up.bin", string(big))
	write(t, p.remote, "down.bin", string(big[:128<<10]))
	p.start(ClientOptions{})
	defer p.stop()
	synced(t, p)
	st := p.c.Status()
	if st.BytesSent < 64<<10 || st.BytesReceived < 32<<10 {
		t.Errorf("bytes sent %d, received %d: want at least a share of the 256 KiB sent and 128 KiB received", st.BytesSent, st.BytesReceived)
	}
	before := st.BytesSent
	write(t, p.local, "more.txt", "more")
	p.waitEqual(5 * time.Second)
	if after := p.c.Status().BytesSent; after <= before {
		t.Errorf("bytes sent did not grow after another file: %d then %d", before, after)
	}
}
