// Package compositekey joins the parts of a composite limiter key, for
// the HTTP middleware and the gRPC interceptors alike.
package compositekey

import "strings"

// Separator joins the parts of a composite key.
const Separator = '|'

// Append writes part to b after a separator unless b is empty and part is
// the first (first reports it), with "|" and "\" within part escaped by
// "\", so that different lists of parts never join to the same key.
func Append(b *strings.Builder, part string, first bool) {
	if !first {
		b.WriteByte(Separator)
	}
	if !strings.ContainsAny(part, `|\`) {
		b.WriteString(part)
		return
	}
	for i := range len(part) {
		if part[i] == Separator || part[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(part[i])
	}
}
