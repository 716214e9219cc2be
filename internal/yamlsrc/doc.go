// Package yamlsrc reads YAML source files with positions, for the loaders of Compose files
// (internal/compose) and devtool manifests (internal/manifest).
//
// It holds what both loaders share: the positioned Error and Position types, a Reader with
// typed accessors over yaml.v3 nodes (merge keys, aliases, "expected X, found Y" messages),
// variable interpolation with compose-go's template rules, the grouped warnings, and the
// variable sources (shell, .env file) that interpolation reads.
//
// Every accessor reports a positioned *Error when a node has the wrong shape and returns
// ok=false, so a loader skips the value and goes on to find every problem in one pass.
package yamlsrc
