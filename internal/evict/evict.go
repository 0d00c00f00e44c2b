// Package evict makes room in the bounded per-key maps that sluice's
// in-process store wrappers keep (the near-cache's denials, the allowance
// Store's blocks).
package evict

// Sample examines up to n of m's entries, from where Go's map iteration
// starts (at random: that makes the sample), and deletes those that judge
// reports due; if none was, it deletes the examined entry that ends
// soonest. An entry judge reports pinned is examined but never deleted.
func Sample[V any](m map[string]V, n int, judge func(V) (end int64, due, pinned bool)) {
	var (
		victim string
		soon   int64
		found  bool
		freed  bool
		seen   int
	)
	for k, v := range m {
		end, due, pinned := judge(v)
		switch {
		case pinned:
		case due:
			delete(m, k)
			freed = true
		case !found || end < soon:
			victim, soon, found = k, end, true
		}
		if seen++; seen == n {
			break
		}
	}
	if !freed && found {
		delete(m, victim)
	}
}
