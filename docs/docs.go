// Package docs reads the commands that nicpool's documentation shows, so that tests can
// run them: a page stays true only while something executes what it tells a user to
// type.
//
// Every fenced block of a shell language (sh, shell, bash, console) is preceded by a
// marker naming what runs it:
//
//	<!-- run: local-cluster -->
//
// The markers are Runs; TestEveryCommandIsRun (docs_test.go) refuses a block without
// one, and each Run's test executes or checks its blocks. A block of commands that
// need a situation first (a full pool, a pod that cannot start) names it:
//
//	<!-- run: situation exhausted-pool -->
//
// and the end-to-end spec of that name creates the situation, then runs the blocks.
package docs

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

// Run names what executes a block's commands.
type Run string

const (
	// Make blocks are make targets; the docs test checks that each exists in the
	// Makefile. `make up` and `make down` are run by cmd/nicpool-local's
	// TestUpAndDown, which checks what README shows they print.
	Make Run = "make"
	// LocalCluster blocks run, in order, against the local cluster with the examples
	// applied (e2e/suite, the walkthrough spec), with KUBECONFIG set and bin/ on PATH.
	LocalCluster Run = "local-cluster"
	// Kustomize blocks apply kustomizations of manifests/; the manifests tests render
	// each one and create its objects on a real API server.
	Kustomize Run = "kustomize"
	// Helm blocks install, upgrade and uninstall the chart; the chart's tests
	// (e2e/helm) run them with the Helm SDK on a real API server.
	Helm Run = "helm"
	// SpiderpoolMigration blocks are the kubectl commands of the migration from
	// spiderpool (`kubectl nicpool` and plain kubectl); operate/migrate/integration runs
	// each of them on a real API server holding spiderpool's records, and runs no
	// migration command they lack.
	SpiderpoolMigration Run = "spiderpool-migration"
	// SpiderpoolRelease blocks are the helm commands of the migration that act on
	// spiderpool's own release; e2e/helm runs them with the Helm SDK on a real API
	// server, against a stand-in of spiderpool's chart with its pre-delete cleanup hook.
	SpiderpoolRelease Run = "spiderpool-release"
	// Situation blocks run, in order, against the local cluster like LocalCluster
	// blocks, after the spec named by the marker (e2e/suite, the troubleshooting
	// specs) created the situation they inspect; the page shows what they print.
	Situation Run = "situation"
)

// Runs are the markers a block may carry.
var Runs = []Run{Make, LocalCluster, Kustomize, Helm, SpiderpoolMigration, SpiderpoolRelease, Situation}

// Command is one command of a block and the output the page shows for it (console
// blocks only).
type Command struct {
	Line   string
	Output []string
	// Where is the page and line of the block.
	Where string
}

// Block is one fenced block of shell commands.
type Block struct {
	File string
	// Line is the line of the opening fence, from 1.
	Line int
	Lang string
	// Run is the marker before the block; empty when there is none.
	Run Run
	// Situation is the name a situation marker gives; empty for the others.
	Situation string
	Commands  []Command
}

func (b Block) String() string { return fmt.Sprintf("%s:%d", b.File, b.Line) }

// shellLangs are the fence languages whose blocks hold commands.
var shellLangs = map[string]bool{"sh": true, "shell": true, "bash": true, "console": true}

// ShellLang says whether a fence's language is a shell's, whose blocks Blocks reads.
func ShellLang(lang string) bool { return shellLangs[lang] }

var runMarker = regexp.MustCompile(`^<!--\s*run:\s*([a-z-]+)(?:\s+([a-z0-9-]+))?\s*-->$`)

// Blocks reads the shell blocks of a Markdown file. In a console block a command starts
// with "$ " and the lines up to the next command are its output; in the other shells
// every line that is not empty or a comment is a command. A line ending in a backslash
// continues on the next.
func Blocks(path string) ([]Block, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var (
		blocks  []Block
		cur     *Block
		marker  Run
		name    string
		pending string
		n       int
	)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if cur == nil {
			if m := runMarker.FindStringSubmatch(trimmed); m != nil {
				marker, name = Run(m[1]), m[2]
				continue
			}
			if lang, ok := strings.CutPrefix(trimmed, "```"); ok {
				if shellLangs[lang] {
					cur = &Block{File: path, Line: n, Lang: lang, Run: marker, Situation: name}
				} else {
					// Skip a block of another language whole.
					for sc.Scan() {
						n++
						if strings.TrimSpace(sc.Text()) == "```" {
							break
						}
					}
				}
				marker, name = "", ""
				continue
			}
			if trimmed != "" {
				marker, name = "", ""
			}
			continue
		}
		if trimmed == "```" {
			for i := range cur.Commands {
				cur.Commands[i].Where = cur.String()
			}
			blocks = append(blocks, *cur)
			cur = nil
			continue
		}
		if cur.Lang == "console" {
			if pending != "" {
				pending += " " + strings.TrimSuffix(trimmed, `\`)
				if !strings.HasSuffix(trimmed, `\`) {
					cur.Commands = append(cur.Commands, Command{Line: pending})
					pending = ""
				}
				continue
			}
			if cmd, ok := strings.CutPrefix(line, "$ "); ok {
				if strings.HasSuffix(cmd, `\`) {
					pending = strings.TrimSuffix(cmd, `\`)
					continue
				}
				cur.Commands = append(cur.Commands, Command{Line: cmd})
				continue
			}
			if len(cur.Commands) == 0 {
				return nil, fmt.Errorf("%s:%d: a console block starts with a command (\"$ ...\")", path, n)
			}
			last := &cur.Commands[len(cur.Commands)-1]
			last.Output = append(last.Output, line)
			continue
		}
		if trimmed == "" || strings.HasPrefix(trimmed, "#") {
			continue
		}
		if pending != "" {
			pending += " " + strings.TrimSuffix(trimmed, `\`)
		} else {
			pending = strings.TrimSuffix(trimmed, `\`)
		}
		if !strings.HasSuffix(trimmed, `\`) {
			cur.Commands = append(cur.Commands, Command{Line: pending})
			pending = ""
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if cur != nil {
		return nil, fmt.Errorf("%s:%d: the block is not closed", path, cur.Line)
	}
	return blocks, nil
}

// Pages are the user documentation of the repository rooted at root: README.md and
// every Markdown file of docs/.
func Pages(root string) ([]string, error) {
	pages, err := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	if err != nil {
		return nil, err
	}
	return append([]string{filepath.Join(root, "README.md")}, pages...), nil
}

// Commands are the commands of every block marked run in the pages of root, in order.
func Commands(root string, run Run) ([]Command, error) {
	return commands(root, func(b Block) bool { return b.Run == run })
}

// SituationCommands are the commands of every block marked with the situation name,
// in order.
func SituationCommands(root, name string) ([]Command, error) {
	return commands(root, func(b Block) bool { return b.Run == Situation && b.Situation == name })
}

// Situations are the names of the situations the pages of root name, in order of
// appearance.
func Situations(root string) ([]string, error) {
	var names []string
	_, err := commands(root, func(b Block) bool {
		if b.Run == Situation && !slices.Contains(names, b.Situation) {
			names = append(names, b.Situation)
		}
		return false
	})
	return names, err
}

func commands(root string, keep func(Block) bool) ([]Command, error) {
	pages, err := Pages(root)
	if err != nil {
		return nil, err
	}
	var cmds []Command
	for _, p := range pages {
		blocks, err := Blocks(p)
		if err != nil {
			return nil, err
		}
		for _, b := range blocks {
			if keep(b) {
				cmds = append(cmds, b.Commands...)
			}
		}
	}
	return cmds, nil
}
