// Package outcome is the one home of the classes sluice.Event.Outcome
// names: sluice classifies each decision with a Class, and the metrics
// adapters key their series by it, a byte where the name would cost a
// string hash per decision.
package outcome

// Class is the outcome of a decision; see sluice.Event.Outcome for what
// each means. The zero Class is none: an Event not classified yet.
type Class uint8

// The classes, in the order of their names.
const (
	Allowed Class = iota + 1
	Denied
	Invalid
	Canceled
	Timeout
	StoreError
)

// Names holds each class's name, the value of sluice.Event.Outcome and
// of the metrics' outcome label, at its index; "" for none. It is read,
// never written.
var Names = [...]string{
	Allowed:    "allowed",
	Denied:     "denied",
	Invalid:    "invalid",
	Canceled:   "canceled",
	Timeout:    "timeout",
	StoreError: "store_error",
}

// String returns the class's name (Names).
func (c Class) String() string { return Names[c] }

// Of returns the class named name, or none if no class has that name.
func Of(name string) Class {
	for c, n := range Names {
		if n == name && n != "" {
			return Class(c)
		}
	}
	return 0
}

// Failed reports whether c is a failure of the store: a timeout or
// another store error. Invalid requests and canceled contexts are not.
func (c Class) Failed() bool { return c == Timeout || c == StoreError }
