package filesync

import (
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
