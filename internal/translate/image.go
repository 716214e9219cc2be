package translate

// DefaultImage is the image reference of a service that has a build section and no image.
// The build package tags what it builds the same way, so deploy finds it; the ":devtool" tag
// keeps it from ever resolving to a public image of the same name.
func DefaultImage(envName, service string) string {
	return envName + "-" + service + ":devtool"
}
