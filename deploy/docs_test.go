package deploy

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// mdLink matches an inline Markdown link or image: [text](target) or
// [text](target "title"); the target is group 1.
var mdLink = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches a code span, whose text is not Markdown.
var inlineCode = regexp.MustCompile("`[^`]*`")

// anchor is the fragment GitHub gives a heading: its text lowercased,
// punctuation other than '-' and '_' dropped, spaces made '-'.
func anchor(heading string) string {
	heading = mdLink.ReplaceAllStringFunc(heading, func(l string) string {
		return l[1:strings.Index(l, "](")]
	})
	var b strings.Builder
	for _, r := range strings.ToLower(strings.TrimSpace(heading)) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		}
	}
	return b.String()
}

// mdDoc is a Markdown file's anchors and the link targets it holds.
type mdDoc struct {
	anchors map[string]bool
	links   []mdRef
}

// mdRef is one link target and the line it is on.
type mdRef struct {
	line   int
	target string
}

// parseMarkdown reads a Markdown text's headings (as anchors, a repeated
// one numbered as GitHub numbers it) and links, outside fenced code and
// code spans; a link's text may run over lines.
func parseMarkdown(text string) mdDoc {
	d := mdDoc{anchors: map[string]bool{}}
	seen := map[string]int{}
	fenced := false
	lines := strings.Split(text, "\n")
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "```") {
			fenced = !fenced
			lines[i] = ""
			continue
		}
		if fenced {
			lines[i] = ""
			continue
		}
		// Code spans become blanks of their length, so offsets keep their lines.
		lines[i] = inlineCode.ReplaceAllStringFunc(l, func(c string) string { return strings.Repeat(" ", len(c)) })
		if h, ok := strings.CutPrefix(strings.TrimLeft(l, "#"), " "); ok && strings.HasPrefix(l, "#") {
			a := anchor(h)
			if n := seen[a]; n > 0 {
				d.anchors[fmt.Sprintf("%s-%d", a, n)] = true
			} else {
				d.anchors[a] = true
			}
			seen[a]++
		}
	}
	prose := strings.Join(lines, "\n")
	for _, m := range mdLink.FindAllStringSubmatchIndex(prose, -1) {
		d.links = append(d.links, mdRef{line: 1 + strings.Count(prose[:m[0]], "\n"), target: prose[m[2]:m[3]]})
	}
	return d
}

// brokenLinks checks every relative link of the Markdown files (paths
// relative to root): the file it names exists, and so does its #anchor
// when it names one. It returns a line per broken link.
func brokenLinks(root string, files []string) ([]string, error) {
	docs := map[string]mdDoc{}
	load := func(path string) (mdDoc, error) {
		if d, ok := docs[path]; ok {
			return d, nil
		}
		b, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			return mdDoc{}, err
		}
		docs[path] = parseMarkdown(string(b))
		return docs[path], nil
	}
	var broken []string
	for _, f := range files {
		d, err := load(f)
		if err != nil {
			return nil, fmt.Errorf("read %s: %w", f, err)
		}
		for _, l := range d.links {
			at := fmt.Sprintf("%s:%d: %s", f, l.line, l.target)
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(l.target, "#")
			target := f
			if path != "" {
				target = filepath.ToSlash(filepath.Join(filepath.Dir(f), path))
				if strings.HasPrefix(target, "../") {
					broken = append(broken, at+": outside the repository")
					continue
				}
				if _, err := os.Stat(filepath.Join(root, target)); err != nil {
					broken = append(broken, at+": no such file")
					continue
				}
			}
			if frag == "" {
				continue
			}
			if !strings.HasSuffix(target, ".md") {
				broken = append(broken, at+": an anchor in a file that is not Markdown")
				continue
			}
			td, err := load(target)
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", target, err)
			}
			if !td.anchors[frag] {
				broken = append(broken, at+": no heading #"+frag+" in "+target)
			}
		}
	}
	return broken, nil
}

// TestDocsLinks: every relative link of README.md and docs/*.md names a
// file that exists and, with an #anchor, a heading that file has.
func TestDocsLinks(t *testing.T) {
	files, err := filepath.Glob("../docs/*.md")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) < 10 {
		t.Fatalf("found %d files in docs/: %v", len(files), files)
	}
	rel := []string{"README.md"}
	for _, f := range files {
		rel = append(rel, strings.TrimPrefix(filepath.ToSlash(f), "../"))
	}
	broken, err := brokenLinks("..", rel)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range broken {
		t.Error(b)
	}
}

// TestBrokenLinksFound: brokenLinks, which TestDocsLinks trusts, finds a
// missing file, a missing anchor in another file and in the same one, a
// link out of the repository, and passes the links that resolve, with
// GitHub's anchors for code, punctuation, links and repeated headings.
func TestBrokenLinksFound(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("docs/a.md", "# The tailer: `hivedr tail`\n\n## Runs\n\n## Runs\n\n### See [b](b.md), then go_on\n\n"+
		"[ok](#the-tailer-hivedr-tail) [ok](#runs-1) [ok](#see-b-then-go_on) [ok](b.md#a-b) [bad\nover lines](#runs-2)\n"+
		"```\n[not a link](nowhere.md)\n```\n`[code](nowhere.md)`\n")
	write("docs/b.md", "# A, b!\n\n[ok](a.md) [ok](../README.md) [bad](c.md) [bad](a.md#nope) [bad](../../shared/x.md) [ok](https://x/y#z)\n")
	write("README.md", "[ok](docs/a.md#runs) [bad](docs/b.md#b)\n")
	got, err := brokenLinks(dir, []string{"README.md", "docs/a.md", "docs/b.md"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:1: docs/b.md#b: no heading #b in docs/b.md",
		"docs/a.md:9: #runs-2: no heading #runs-2 in docs/a.md", // the line it starts on
		"docs/b.md:3: c.md: no such file",
		"docs/b.md:3: a.md#nope: no heading #nope in docs/a.md",
		"docs/b.md:3: ../../shared/x.md: outside the repository",
	}
	if !slices.Equal(got, want) {
		t.Errorf("brokenLinks:\n got %q\nwant %q", got, want)
	}
}
