package translate

import (
	"container/heap"
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

	// Kahn's algorithm with the ready services in a min-heap by file position: always placing
	// the earliest free service gives the same order as rescanning the file each time, in
	// O((services + edges) log services) instead of quadratic time.
	waiting := make([]int, len(p.Services)) // unplaced dependencies per service
	dependents := make([][]int, len(p.Services))
	for i, s := range p.Services {
		seen := map[string]bool{}
		for _, d := range s.DependsOn {
			if seen[d.Service] {
				continue
			}
			seen[d.Service] = true
			j := index[d.Service]
			waiting[i]++
			dependents[j] = append(dependents[j], i)
		}
	}
	ready := &intHeap{}
	for i := range p.Services {
		if waiting[i] == 0 {
			heap.Push(ready, i)
		}
	}
	done := make([]bool, len(p.Services))
	out := make([]*compose.Service, 0, len(p.Services))
	for ready.Len() > 0 {
		i := heap.Pop(ready).(int)
		done[i] = true
		out = append(out, p.Services[i])
		for _, j := range dependents[i] {
			if waiting[j]--; waiting[j] == 0 {
				heap.Push(ready, j)
			}
		}
	}
	if len(out) < len(p.Services) {
		return nil, cycleError(p, index, done)
	}
	return out, nil
}

type intHeap []int

func (h intHeap) Len() int           { return len(h) }
func (h intHeap) Less(i, j int) bool { return h[i] < h[j] }
func (h intHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *intHeap) Push(x any)        { *h = append(*h, x.(int)) }
func (h *intHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// cycleError names one cycle among the services not yet placed, by walking dependencies from the
// first of them until a service repeats.
func cycleError(p *compose.Project, index map[string]int, done []bool) error {
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
			if j := index[d.Service]; !done[j] {
				pos = d.Pos
				cur = p.Services[j]
				break
			}
		}
	}
}
