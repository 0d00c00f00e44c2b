package sluice_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// links finds the targets of Markdown links and of HTML images.
var links = regexp.MustCompile(`\]\(([^)\s]+)\)|src="([^"]+)"`)

// TestDocsLinkToFilesThatExist follows every relative link of the README,
// the guides and the modules' READMEs, as a reader clicking through would,
// and requires the file it names.
func TestDocsLinkToFilesThatExist(t *testing.T) {
	docs, err := filepath.Glob("docs/*.md")
	require.NoError(t, err)
	modules, err := filepath.Glob("*/README.md")
	require.NoError(t, err)
	pages := append(append([]string{"README.md"}, docs...), modules...)
	require.Greater(t, len(docs), 5, "the guides are found")
	followed := 0
	for _, page := range pages {
		text, err := os.ReadFile(page)
		require.NoError(t, err)
		for _, m := range links.FindAllStringSubmatch(string(text), -1) {
			target := m[1] + m[2]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			_, err := os.Stat(filepath.Join(filepath.Dir(page), target))
			require.NoError(t, err, "%s links to %s", page, m[0])
			followed++
		}
	}
	require.Greater(t, followed, 20, "the links are found")
}
