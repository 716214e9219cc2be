package filesync

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The versions CLI and agent agree on, with the previous release's (2,
// strict equality) on either side, and what each pairing can do.
func TestProtocolNegotiation(t *testing.T) {
	for _, c := range []struct {
		name    string
		client  uint16 // newest offered by the CLI
		agent   uint16 // newest spoken by the agent
		strict  bool   // the agent answers as protocol 2 agents did
		want    uint16
		opens   int
		deltaOK bool
	}{
		{"this release both sides", 0, 0, false, ProtocolVersion, 1, true},
		{"new CLI, previous agent (strict 2)", 0, 2, true, 2, 2, false},
		{"previous CLI offering 2, new agent", 2, 0, false, 2, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := newDPair(t)
			p.sopts = ServerOptions{newest: c.agent, strict: c.strict, Logger: testLogger(t)}
			big := randBytes(9, 2<<20)
			must(t, os.WriteFile(filepath.Join(p.local, "big.bin"), big, 0o644))
			write(t, p.remote, "from-agent.txt", "remote")
			p.start(ClientOptions{newest: c.client, Logger: testLogger(t)})
			defer p.stop()
			p.waitSame("from-agent.txt", time.Minute)
			p.waitSame("big.bin", time.Minute)
			if got := p.c.proto; got != c.want {
				t.Errorf("protocol %d, want %d", got, c.want)
			}
			if p.opens != c.opens {
				t.Errorf("%d streams opened, want %d", p.opens, c.opens)
			}
			// An edit both ways after the first sync.
			editByte(t, filepath.Join(p.local, "big.bin"), 1<<20)
			n0 := p.sent.load() + p.received.load()
			p.waitSame("big.bin", time.Minute)
			moved := p.sent.load() + p.received.load() - n0
			if c.deltaOK != (moved < 1<<20) {
				t.Errorf("1 byte changed in 2 MiB moved %d bytes (delta expected: %v)", moved, c.deltaOK)
			}
			write(t, p.remote, "from-agent.txt", "remote edit")
			deadline := time.Now().Add(time.Minute)
			for contentOf(filepath.Join(p.local, "from-agent.txt")) != "remote edit" {
				if time.Now().After(deadline) {
					t.Fatal("the remote edit did not arrive")
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
}

func contentOf(p string) string {
	b, _ := os.ReadFile(p)
	return string(b)
}

// The hello answer of a protocol 2 session holds exactly what protocol 2
// decoders read (they refuse trailing bytes): no capabilities.
func TestHelloAnswerForProtocol2HasNoCapabilities(t *testing.T) {
	for _, offer := range []uint16{2, 3} {
		a, b := net.Pipe()
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- Serve(ctx, b, ServerOptions{StateDir: t.TempDir(), Logger: testLogger(t)}) }()
		must(t, a.SetDeadline(time.Now().Add(10*time.Second)))
		must(t, writeHelloV(a, offer))
		v, err := readHelloV(a, "agent")
		must(t, err)
		if v != offer {
			t.Fatalf("offered %d, answered %d", offer, v)
		}
		out := newSender(a, newQueue[any](), nil, nil)
		must(t, out.send(&helloMsg{Roots: []string{t.TempDir()}}))
		must(t, out.fw.flush())
		fr := newFrameReader(a)
		typ, body, err := fr.next()
		must(t, err)
		if typ != msgHelloOK {
			t.Fatalf("message type %d", typ)
		}
		// protocol 2's decoding of the answer
		d := &decoder{b: body}
		n := d.count(1)
		for i := 0; i < n; i++ {
			d.str()
		}
		if offer == 2 && (d.err != nil || len(d.b) != 0) {
			t.Errorf("protocol 2 answer: %v, %d bytes a protocol 2 CLI refuses", d.err, len(d.b))
		}
		if offer == 3 && len(d.b) == 0 {
			t.Errorf("protocol 3 answer without capabilities")
		}
		out.fw.close()
		fr.close()
		cancel()
		a.Close()
		<-done
	}
}

func TestHelloCapabilitiesRoundTrip(t *testing.T) {
	in := &helloOKMsg{IDs: []string{"a", "b"}, Caps: []caps{{noExec: true, foldCase: true, foldNorm: true, noLinks: true}, {}}}
	var e encoder
	typ := encodeMsg(&e, in)
	m, err := decodeMsg(typ, e.b)
	must(t, err)
	out := m.(*helloOKMsg)
	if len(out.Caps) != 2 || out.Caps[0] != in.Caps[0] || out.Caps[1] != in.Caps[1] {
		t.Fatalf("caps %+v, want %+v", out.Caps, in.Caps)
	}
	// unknown bits from a later release are ignored
	if c := capsFromBits(capExec | 1<<40); c != (caps{}) {
		t.Errorf("caps with an unknown bit: %+v", c)
	}
	// a count that does not match the IDs is refused
	e.b = e.b[:0]
	encodeMsg(&e, &helloOKMsg{IDs: []string{"a"}})
	e.uvarint(2)
	e.uvarint(1)
	e.uvarint(1)
	if _, err := decodeMsg(msgHelloOK, e.b); err == nil {
		t.Error("capabilities of 2 folders for 1 ID accepted")
	}
}

// Below the floor, both ends say which versions they speak and what to do.
func TestProtocolBelowFloorIsClear(t *testing.T) {
	var buf bytes.Buffer
	buf.WriteString("DTSY\x00\x01")
	_, err := exchangeHello(&struct {
		*bytes.Buffer
	}{&buf}, ProtocolVersion)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "protocol 1") || !strings.Contains(err.Error(), "2 to 3") ||
		!strings.Contains(err.Error(), "devtool up") {
		t.Errorf("agent answering 1: %v", err)
	}
	var rw bytes.Buffer
	rw.WriteString("DTSY\x00\x01")
	v, err := serverHandshake(&rw, ProtocolVersion, false)
	if !errors.Is(err, ErrVersion) || !strings.Contains(err.Error(), "protocol 1") {
		t.Errorf("CLI offering 1: %v", err)
	}
	if v != ProtocolVersion || !bytes.Equal(rw.Bytes(), []byte("DTSY\x00\x03")) {
		t.Errorf("answer to an offer of 1: %d %q", v, rw.Bytes())
	}
	// A later CLI's offer is answered with this agent's newest.
	rw.Reset()
	rw.WriteString("DTSY\x00\x09")
	if v, err := serverHandshake(&rw, ProtocolVersion, false); err != nil || v != ProtocolVersion {
		t.Errorf("offer 9: %d %v", v, err)
	}
}
