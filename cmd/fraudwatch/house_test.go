package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// Rooms stay small enough to read in one sitting (CONTRIBUTING.md, Layout):
// no Go file outside the tests over 400 lines, no function over 100. A file
// that grows past it is split along its concerns before more is added.
func TestRoomsStaySmall(t *testing.T) {
	const maxFileLines, maxFuncLines = 400, 100
	files := 0
	err := filepath.WalkDir("../..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != "../.." {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		files++
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		name := strings.TrimPrefix(filepath.ToSlash(path), "../../")
		if n := fset.File(f.Pos()).LineCount(); n > maxFileLines {
			t.Errorf("%s is %d lines, more than %d: split it along its concerns", name, n, maxFileLines)
		}
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			if n := fset.Position(fn.End()).Line - fset.Position(fn.Pos()).Line + 1; n > maxFuncLines {
				t.Errorf("%s: %s is %d lines, more than %d", name, fn.Name.Name, n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 100 {
		t.Fatalf("read %d Go files, want the module's (over 100)", files)
	}
}
