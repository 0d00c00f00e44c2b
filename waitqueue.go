package sluice

import "sync"

// waitQueue lines up the callers of Acquire per key, first come first
// served: only the head of a key's line asks the store, and when it
// leaves (granted, or its context ended) the next becomes the head.
type waitQueue struct {
	mu    sync.Mutex
	lines map[string][]*waiter
}

// A waiter is one caller in a key's line; head is closed when it is
// first.
type waiter struct {
	head chan struct{}
}

// join puts a new waiter at the end of key's line and returns it.
func (q *waitQueue) join(key string) *waiter {
	w := &waiter{head: make(chan struct{})}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.lines == nil {
		q.lines = make(map[string][]*waiter)
	}
	line := append(q.lines[key], w)
	q.lines[key] = line
	if len(line) == 1 {
		close(w.head)
	}
	return w
}

// leave takes w out of key's line, wherever it stands, and makes the next
// waiter the head if w was.
func (q *waitQueue) leave(key string, w *waiter) {
	q.mu.Lock()
	defer q.mu.Unlock()
	line := q.lines[key]
	for i, x := range line {
		if x != w {
			continue
		}
		line = append(line[:i], line[i+1:]...)
		if i == 0 && len(line) > 0 {
			close(line[0].head)
		}
		break
	}
	if len(line) == 0 {
		delete(q.lines, key)
	} else {
		q.lines[key] = line
	}
}
