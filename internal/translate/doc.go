// Package translate turns a loaded Compose project into Kubernetes objects. It is a pure
// function: no I/O, no clock, no randomness, so its output is tested with golden files.
package translate
