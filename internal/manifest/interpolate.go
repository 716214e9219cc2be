package manifest

import (
	"gopkg.in/yaml.v3"

	"github.com/devtool/devtool/internal/yamlsrc"
)

// commandNodes finds the nodes holding deploy and destroy commands: the destroy value, a
// deploy list, and deploy.commands. Interpolation leaves them as written: the shell running
// them expands their variables at deploy time.
func commandNodes(doc *yaml.Node) map[*yaml.Node]bool {
	skip := map[*yaml.Node]bool{}
	root := yamlsrc.Deref(doc)
	if root == nil || root.Kind != yaml.MappingNode {
		return skip
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		k, v := root.Content[i], root.Content[i+1]
		switch k.Value {
		case "destroy":
			skip[v] = true
		case "deploy":
			d := yamlsrc.Deref(v)
			switch {
			case d == nil:
			case d.Kind == yaml.SequenceNode:
				skip[v], skip[d] = true, true
			case d.Kind == yaml.MappingNode:
				for j := 0; j+1 < len(d.Content); j += 2 {
					if d.Content[j].Value == "commands" {
						skip[d.Content[j+1]] = true
					}
				}
			}
		}
	}
	return skip
}
