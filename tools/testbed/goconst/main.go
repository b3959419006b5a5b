// Command goconst prints the value of string constants declared in a Go package directory.
//
// The test bed reads image tags and manifests from the Go sources of the tools it
// imitates (kubeadm's default etcd/CoreDNS/pause versions, kind's storage manifest and
// image names, CAPD's load balancer image), so that no such value is copied by hand.
// Constants may be concatenations of string literals and other string constants of the
// same package, which is what those files use.
//
// Usage: goconst [-0] DIR NAME...   (one value per NAME, newline- or, with -0, NUL-terminated)
package main

import (
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

func main() {
	nul := flag.Bool("0", false, "terminate each value with a NUL byte instead of a newline")
	flag.Usage = func() { fmt.Fprintln(os.Stderr, "usage: goconst [-0] DIR NAME...") }
	flag.Parse()
	if flag.NArg() < 2 {
		flag.Usage()
		os.Exit(2)
	}
	consts, err := parseConsts(flag.Arg(0))
	if err != nil {
		fmt.Fprintln(os.Stderr, "goconst:", err)
		os.Exit(1)
	}
	sep := "\n"
	if *nul {
		sep = "\x00"
	}
	for _, name := range flag.Args()[1:] {
		v, err := eval(consts, name, 0)
		if err != nil {
			fmt.Fprintf(os.Stderr, "goconst: %s: %v\n", name, err)
			os.Exit(1)
		}
		fmt.Print(v, sep)
	}
}

// parseConsts collects the expressions of every package-level constant in dir (tests excluded).
func parseConsts(dir string) (map[string]ast.Expr, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	consts := map[string]ast.Expr{}
	for _, ent := range entries {
		name := ent.Name()
		if ent.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, 0)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				continue
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if i < len(vs.Values) {
						consts[n.Name] = vs.Values[i]
					}
				}
			}
		}
	}
	return consts, nil
}

// eval folds a string constant: literals, references to other constants, and "+".
func eval(consts map[string]ast.Expr, name string, depth int) (string, error) {
	if depth > 32 {
		return "", fmt.Errorf("constant reference cycle")
	}
	e, ok := consts[name]
	if !ok {
		return "", fmt.Errorf("no such string constant")
	}
	return evalExpr(consts, e, depth)
}

func evalExpr(consts map[string]ast.Expr, e ast.Expr, depth int) (string, error) {
	switch x := e.(type) {
	case *ast.BasicLit:
		if x.Kind != token.STRING {
			return "", fmt.Errorf("not a string literal: %s", x.Value)
		}
		return strconv.Unquote(x.Value)
	case *ast.Ident:
		return eval(consts, x.Name, depth+1)
	case *ast.ParenExpr:
		return evalExpr(consts, x.X, depth)
	case *ast.BinaryExpr:
		if x.Op != token.ADD {
			return "", fmt.Errorf("unsupported operator %s", x.Op)
		}
		l, err := evalExpr(consts, x.X, depth)
		if err != nil {
			return "", err
		}
		r, err := evalExpr(consts, x.Y, depth)
		if err != nil {
			return "", err
		}
		return l + r, nil
	default:
		return "", fmt.Errorf("unsupported expression %T", e)
	}
}
