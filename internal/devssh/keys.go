// Package devssh is devtool's SSH client to the dev container's agent: the key pair
// per dev container, host key pinning, a connection with keepalive, exec with or
// without a PTY, subsystems, and a Session that keeps forwards alive across
// reconnections.
package devssh

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/devtool/devtool/internal/atomicfile"
	"github.com/devtool/devtool/internal/safefile"
)

// LoadOrCreateKey reads the ed25519 private key at path, creating it (file 0600,
// folder 0700) when it does not exist. A key file readable by others is refused.
func LoadOrCreateKey(path string) (ssh.Signer, error) {
	data, fi, err := readKey(path)
	if err == nil {
		if fi.Mode().Perm()&0o077 != 0 {
			return nil, fmt.Errorf("%s: private key is accessible by others (mode %04o); run chmod 600 %s", path, fi.Mode().Perm(), path)
		}
		s, err := ssh.ParsePrivateKey(data)
		if err != nil {
			return nil, fmt.Errorf("%s: not a valid private key (%v); delete it to create a new one", path, err)
		}
		return s, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, err
	}
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, err
	}
	block, err := ssh.MarshalPrivateKey(priv, "devtool")
	if err != nil {
		return nil, err
	}
	if err := atomicfile.WriteNew(path, pem.EncodeToMemory(block), 0o600); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateKey(path)
		}
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// maxKeyFile caps a private key or known_hosts file: an ed25519 key takes about 400 bytes.
const maxKeyFile = 64 << 10

// readKey reads a key file of the state folder with safefile: never through a symbolic link,
// never blocking on a FIFO or a device, capped.
func readKey(path string) ([]byte, fs.FileInfo, error) {
	f, err := safefile.OpenNoFollow(path)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	data, err := safefile.ReadAll(f, path, maxKeyFile)
	return data, fi, err
}

// HostKeyChangedError says the agent presented another host key than the pinned one.
type HostKeyChangedError struct {
	File      string
	Want, Got string // SHA256 fingerprints
}

func (e *HostKeyChangedError) Error() string {
	return fmt.Sprintf("the dev container's SSH host key changed (pinned %s, got %s): if its volume was recreated this is expected; delete %s and retry", e.Want, e.Got, e.File)
}

// hostAlias is the name the pinned key is recorded under in the known_hosts file.
const hostAlias = "devtool-agent"

// pinHostKey returns a HostKeyCallback that records the first key seen in file (in
// known_hosts format) and accepts only that key afterwards.
func pinHostKey(file string) ssh.HostKeyCallback {
	return func(_ string, _ net.Addr, key ssh.PublicKey) error {
		if file == "" {
			return errors.New("devssh: no known_hosts file configured")
		}
		data, _, err := readKey(file)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				return err
			}
			line := knownhosts.Line([]string{hostAlias}, key) + "\n"
			err := atomicfile.WriteNew(file, []byte(line), 0o600)
			if errors.Is(err, fs.ErrExist) {
				return pinHostKey(file)("", nil, key)
			}
			return err
		}
		if err != nil {
			return err
		}
		var want ssh.PublicKey
		rest := data
		for len(bytes.TrimSpace(rest)) > 0 {
			_, hosts, k, _, r, err := ssh.ParseKnownHosts(rest)
			if err != nil {
				return fmt.Errorf("%s: %v; delete it to pin the agent's key again", file, err)
			}
			rest = r
			for _, h := range hosts {
				if h == hostAlias {
					want = k
				}
			}
		}
		if want == nil {
			return fmt.Errorf("%s: no %s entry; delete it to pin the agent's key again", file, hostAlias)
		}
		if !bytes.Equal(want.Marshal(), key.Marshal()) {
			return &HostKeyChangedError{File: file, Want: ssh.FingerprintSHA256(want), Got: ssh.FingerprintSHA256(key)}
		}
		return nil
	}
}

// Pin records key as the agent's host key in file (known_hosts format, 0600, folder 0700),
// replacing any earlier pin. Use it only for a key learnt through an authenticated channel —
// for example a host key the caller generated and installed in the dev container itself —
// never for a key the connection presented.
func Pin(file string, key ssh.PublicKey) error {
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(file, []byte(knownhosts.Line([]string{hostAlias}, key)+"\n"), 0o600)
}

// MarshalKey is the OpenSSH PEM text of a private key LoadOrCreateKey reads (for installing
// a host key the CLI generated in the agent's home).
func MarshalKey(path string) ([]byte, error) {
	if _, err := LoadOrCreateKey(path); err != nil {
		return nil, err
	}
	data, _, err := readKey(path)
	return data, err
}
