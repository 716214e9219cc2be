package translate

import (
	"strings"

	"github.com/devtool/devtool/internal/compose"
)

// dependencyOrder sorts services so every service comes after what it depends on. Among services
// free to go, file order wins, so the result is stable: it only moves a service when a dependency
// forces it to. Unknown dependencies and cycles are errors (the loader checks them too; this
// package does not trust a hand-built model).
func dependencyOrder(p *compose.Project) ([]*compose.Service, error) {
	index := map[string]int{}
	for i, s := range p.Services {
		index[s.Name] = i
	}
	for _, s := range p.Services {
		for _, d := range s.DependsOn {
			if _, ok := index[d.Service]; !ok {
				return nil, errorAt(d.Pos, "service %q depends on %q, which is not a service of this file", s.Name, d.Service)
			}
			if d.Service == s.Name {
				return nil, errorAt(d.Pos, "service %q depends on itself", s.Name)
			}
		}
	}

	done := make([]bool, len(p.Services))
	out := make([]*compose.Service, 0, len(p.Services))
	for len(out) < len(p.Services) {
		progressed := false
		// Take the first service (in file order) whose dependencies are all placed, then start over,
		// so an earlier service always goes before a later one when both are free.
		for i, s := range p.Services {
			if done[i] || !dependenciesPlaced(s, index, done) {
				continue
			}
			done[i] = true
			out = append(out, s)
			progressed = true
			break
		}
		if !progressed {
			return nil, cycleError(p, done)
		}
	}
	return out, nil
}

func dependenciesPlaced(s *compose.Service, index map[string]int, done []bool) bool {
	for _, d := range s.DependsOn {
		if !done[index[d.Service]] {
			return false
		}
	}
	return true
}

// cycleError names one cycle among the services not yet placed, by walking dependencies from the
// first of them until a service repeats.
func cycleError(p *compose.Project, done []bool) error {
	var start *compose.Service
	for i, s := range p.Services {
		if !done[i] {
			start = s
			break
		}
	}
	seen := map[string]int{}
	var path []string
	var pos compose.Position
	cur := start
	for {
		if at, ok := seen[cur.Name]; ok {
			cycle := append(path[at:], cur.Name)
			return errorAt(pos, "depends_on forms a cycle: %s", strings.Join(cycle, " -> "))
		}
		seen[cur.Name] = len(path)
		path = append(path, cur.Name)
		// Follow the first dependency that is itself unplaced: one always exists, or cur would be placed.
		for _, d := range cur.DependsOn {
			next := p.Service(d.Service)
			if !done[indexOf(p, next)] {
				pos = d.Pos
				cur = next
				break
			}
		}
	}
}

func indexOf(p *compose.Project, s *compose.Service) int {
	for i, x := range p.Services {
		if x == s {
			return i
		}
	}
	return -1
}
