//go:build !unix

package safefile

// oNoFollow: no such flag here; refuseLink's check before the open stands alone.
const oNoFollow = 0
