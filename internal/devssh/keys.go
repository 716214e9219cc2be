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
)

// LoadOrCreateKey reads the ed25519 private key at path, creating it (file 0600,
// folder 0700) when it does not exist. A key file readable by others is refused.
func LoadOrCreateKey(path string) (ssh.Signer, error) {
	data, err := os.ReadFile(path)
	if err == nil {
		fi, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
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
	if err := writeExclusive(path, pem.EncodeToMemory(block)); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return LoadOrCreateKey(path)
		}
		return nil, err
	}
	return ssh.NewSignerFromKey(priv)
}

// writeExclusive writes data to a new file at path (0600) through a temporary file
// linked into place, so no reader ever sees a partial file; fs.ErrExist when path
// already exists.
func writeExclusive(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Link(tmp.Name(), path)
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
		data, err := os.ReadFile(file)
		if errors.Is(err, fs.ErrNotExist) {
			if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
				return err
			}
			line := knownhosts.Line([]string{hostAlias}, key) + "\n"
			err := writeExclusive(file, []byte(line))
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
	tmp, err := os.CreateTemp(filepath.Dir(file), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(knownhosts.Line([]string{hostAlias}, key) + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), file)
}

// MarshalKey is the OpenSSH PEM text of a private key LoadOrCreateKey reads (for installing
// a host key the CLI generated in the agent's home).
func MarshalKey(path string) ([]byte, error) {
	if _, err := LoadOrCreateKey(path); err != nil {
		return nil, err
	}
	return os.ReadFile(path)
}
