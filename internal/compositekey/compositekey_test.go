package compositekey

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func join(parts ...string) string {
	var b strings.Builder
	for i, p := range parts {
		Append(&b, p, i == 0)
	}
	return b.String()
}

func TestAppendEscapesSoDifferentPartsNeverCollide(t *testing.T) {
	require.Equal(t, "a|b", join("a", "b"))
	require.Equal(t, `a\|b`, join("a|b"))
	require.Equal(t, `a\\|b`, join(`a\`, "b"))
	require.Equal(t, "|b", join("", "b"))
	lists := [][]string{{"a|b", "c"}, {"a", "b|c"}, {"a", "b", "c"}, {`a\`, "b"}, {`a\|b`}, {"a|b|c"}}
	seen := map[string][]string{}
	for _, l := range lists {
		k := join(l...)
		require.NotContains(t, seen, k, "%q and %q", l, seen[k])
		seen[k] = l
	}
}
