package store

import (
	"context"
	"testing"
)

// FuzzPHC: a stored hash string, however broken, never panics, never verifies, and never costs more
// than the bounded parameters allow.
func FuzzPHC(f *testing.F) {
	h, _ := HashPassword(context.Background(), "seed password")
	for _, s := range []string{h, "", "$argon2id$v=19$m=19456,t=2,p=1$$", "$argon2id$v=19$m=0,t=0,p=0$AA$AA"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p := parsePHC(s)
		if p.m > 256*1024 || p.t > 10 || p.p > 4 || p.m < 8*1024 || p.t < 1 || p.p < 1 {
			t.Fatalf("parameters out of bounds: %+v", p)
		}
		if s != h {
			if ok, err := VerifyPassword(context.Background(), s, "seed password"); ok && err == nil && s != h {
				// only a string that encodes the same hash may verify
				if parsePHC(s).broken {
					t.Fatalf("a broken string verified: %q", s)
				}
			}
		}
	})
}
