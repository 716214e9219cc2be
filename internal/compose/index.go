package compose

import (
	"sync"
	"unsafe"
)

// Lookups by name (Project.Service, Volume, Secret, Config) go through an index built once per project
// and rebuilt only when it could be stale, so loading, checking and translating N services cost
// O(N), not O(N²) (20,000 services with endpoints and deploy subsets: see TestLookupsLinear).
//
// The index maps a name to its position in the slice. A hit is checked against the slice (the
// entry at that position still has that name), so a renamed, removed or reordered entry is never
// returned by mistake. A miss is trusted only while the slice is the one indexed (same backing
// array and length): appending, filtering or replacing the slice triggers one rebuild. A name
// changed in place is seen through the hit check; a new name given in place to an existing entry
// needs InvalidateIndex (the loader calls it after converting names for Kubernetes).

// nameIndex indexes a slice of T by name.
type nameIndex struct {
	pos  map[string]int
	data unsafe.Pointer // the indexed slice's backing array and length
	n    int
}

// projectIndex holds a project's indexes. A Project copied by value shares it: each lookup
// still checks its own slice.
type projectIndex struct {
	services, volumes, secrets, configs nameIndex
}

// indexMu guards every project's index (lookups are short; Projects are rarely shared between
// goroutines).
var indexMu sync.Mutex

// indexScans counts the entries visited by index builds (tests check lookups stay linear).
var indexScans int

func lookup[T any](idx *nameIndex, list []*T, nameOf func(*T) string, name string) *T {
	i, ok := idx.pos[name]
	if ok && i < len(list) && nameOf(list[i]) == name {
		return list[i]
	}
	// ok here means the entry moved or was renamed: rebuild.
	if !ok && idx.pos != nil && idx.data == unsafe.Pointer(unsafe.SliceData(list)) && idx.n == len(list) {
		return nil // a miss on the slice that was indexed
	}
	idx.pos = make(map[string]int, len(list))
	for i := len(list) - 1; i >= 0; i-- { // the first of duplicate names wins, as a linear search
		idx.pos[nameOf(list[i])] = i
	}
	indexScans += len(list)
	idx.data, idx.n = unsafe.Pointer(unsafe.SliceData(list)), len(list)
	if i, ok := idx.pos[name]; ok {
		return list[i]
	}
	return nil
}

func (p *Project) indexes() *projectIndex {
	if p.index == nil {
		p.index = &projectIndex{}
	}
	return p.index
}

// InvalidateIndex makes the next lookups rebuild the project's name indexes. Needed only after
// giving an existing service or volume a new name in place (appending, filtering or replacing
// Services or Volumes, and removing or renaming entries, are seen by themselves).
func (p *Project) InvalidateIndex() {
	indexMu.Lock()
	defer indexMu.Unlock()
	p.index = nil
}
