// Command gensql writes pgstore's SQL statements, one file each, into the
// directory its -o flag names, and deletes the .sql files there that are
// no statement's any more. go generate runs it from package pgstore:
//
//	go generate ./pgstore
package main

import (
	"flag"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/sluice-go/sluice/pgstore/internal/sqlgen"
)

func main() {
	out := flag.String("o", "", "the `directory` to write the statements into")
	flag.Parse()
	if *out == "" || flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := write(*out, sqlgen.Files()); err != nil {
		fmt.Fprintln(os.Stderr, "gensql:", err)
		os.Exit(1)
	}
}

// write writes files into dir, and deletes the other .sql files there.
func write(dir string, files []sqlgen.File) error {
	written := make(map[string]bool, len(files))
	for _, f := range files {
		path := filepath.Join(dir, filepath.FromSlash(f.Path))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(path, []byte(f.Text), 0o644); err != nil {
			return err
		}
		written[path] = true
	}
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".sql") || written[path] {
			return err
		}
		return os.Remove(path)
	})
}
