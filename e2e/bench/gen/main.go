// Command gen prepares and checks the data of `make bench-copy`
// (e2e/bench/bench-copy.sh) on the local HDFS miniclusters.
//
//	gen gen    -nn HOST:PORT [-root /bench] ...
//	gen verify -src-nn A -src-http A -src PATH -dst-nn B -dst-http B -dst PATH [-crc]
//	gen rm     -nn HOST:PORT PATH...
//	gen mkdir  -nn HOST:PORT PATH...
//	gen tasks, gen completions: copyd's path through Kafka (copyd.go)
//
// gen makes sure the two data sets exist on the source cluster, writing only
// what is missing: "large", a few big files of random bytes under
// ROOT/large, and "small", many small files of random bytes spread over
// directories under ROOT/small. Every file is written under ROOT/.gen-tmp
// and renamed into place once closed, so a data set directory only ever
// holds complete files; a file of the wrong size, or one the layout does not
// name, is removed. A second run over a complete data set writes nothing.
//
// verify compares a copy with its source: the same relative file names, the
// same lengths and (with -crc) the same COMPOSITE-CRC32C, which does not
// depend on the block size either side stores the file with. It prints the
// copy's file count, byte count and block sizes, and exits non-zero naming
// the first differences.
//
// rm removes paths recursively (a missing path is not an error); mkdir
// makes directories and their parents.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/hivedr/hivedr/internal/hdfscrc"
)

const user = "hivedr"

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch os.Args[1] {
	case "gen":
		err = runGen(os.Args[2:])
	case "verify":
		err = runVerify(os.Args[2:])
	case "rm":
		err = runRm(os.Args[2:], false)
	case "mkdir":
		err = runRm(os.Args[2:], true)
	case "tasks":
		err = runTasks(os.Args[2:])
	case "completions":
		err = runCompletions(os.Args[2:])
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: gen gen|verify|rm|mkdir|tasks|completions [flags]; see the package comment")
	os.Exit(2)
}

func connect(nn string) (*hdfs.Client, error) {
	c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{nn}, User: user})
	if err != nil {
		return nil, fmt.Errorf("connect to NameNode %s: %w", nn, err)
	}
	return c, nil
}

// sizeFlag parses sizes such as 4096, 4KiB, 256MiB, 1GiB.
type sizeFlag int64

func (s *sizeFlag) String() string { return fmt.Sprint(int64(*s)) }
func (s *sizeFlag) Set(v string) error {
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if strings.HasSuffix(v, u.suf) {
			v, mult = strings.TrimSuffix(v, u.suf), u.m
			break
		}
	}
	var n int64
	if _, err := fmt.Sscan(v, &n); err != nil || n < 0 {
		return fmt.Errorf("bad size %q", v)
	}
	*s = sizeFlag(n * mult)
	return nil
}

// fileSpec is one file a data set must hold.
type fileSpec struct {
	path string
	size int64
	seed uint64
}

func runGen(args []string) error {
	fs := flag.NewFlagSet("gen", flag.ExitOnError)
	nn := fs.String("nn", "127.0.0.1:18020", "source NameNode host:port")
	root := fs.String("root", "/bench", "root of the data sets")
	largeN := fs.Int("large-files", 4, "files of the large data set")
	largeSize := sizeFlag(256 << 20)
	fs.Var(&largeSize, "large-size", "size of each large file")
	smallN := fs.Int("small-files", 10000, "files of the small data set")
	smallDirs := fs.Int("small-dirs", 100, "directories the small files are spread over")
	smallSize := sizeFlag(4 << 10)
	fs.Var(&smallSize, "small-size", "size of each small file")
	workers := fs.Int("workers", 8, "concurrent writers (each its own NameNode connection)")
	fs.Parse(args)
	if *smallDirs < 1 || *workers < 1 {
		return errors.New("-small-dirs and -workers must be at least 1")
	}

	c, err := connect(*nn)
	if err != nil {
		return err
	}
	defer c.Close()
	tmp := path.Join(*root, ".gen-tmp")
	if err := c.RemoveAll(tmp); err != nil && !os.IsNotExist(err) {
		return fmt.Errorf("remove %s: %w", tmp, err)
	}
	if err := c.MkdirAll(tmp, 0o755); err != nil {
		return fmt.Errorf("mkdir %s: %w", tmp, err)
	}

	var want []fileSpec
	for i := 0; i < *largeN; i++ {
		want = append(want, fileSpec{path.Join(*root, "large", fmt.Sprintf("part-%05d", i)), int64(largeSize), uint64(1_000_000 + i)})
	}
	for i := 0; i < *smallN; i++ {
		d := fmt.Sprintf("d%03d", i%*smallDirs)
		want = append(want, fileSpec{path.Join(*root, "small", d, fmt.Sprintf("f%05d", i)), int64(smallSize), uint64(i)})
	}

	start := time.Now()
	todo, err := reconcile(c, []string{path.Join(*root, "large"), path.Join(*root, "small")}, want)
	if err != nil {
		return err
	}
	var bytes int64
	for _, f := range todo {
		bytes += f.size
	}
	fmt.Printf("gen: %d of %d files present; writing %d files, %d bytes\n", len(want)-len(todo), len(want), len(todo), bytes)
	if len(todo) == 0 {
		c.RemoveAll(tmp)
		return nil
	}
	// Directories first, by one client, so workers do not race on them.
	dirs := map[string]bool{}
	for _, f := range todo {
		dirs[path.Dir(f.path)] = true
	}
	for d := range dirs {
		if err := c.MkdirAll(d, 0o755); err != nil {
			return fmt.Errorf("mkdir %s: %w", d, err)
		}
	}
	// Large files first so that they do not all end up last on one worker.
	sort.SliceStable(todo, func(i, j int) bool { return todo[i].size > todo[j].size })

	jobs := make(chan fileSpec)
	var (
		wg       sync.WaitGroup
		firstErr error
		errOnce  sync.Once
		done     atomic.Int64
		failed   atomic.Bool
	)
	fail := func(err error) {
		errOnce.Do(func() { firstErr = err })
		failed.Store(true)
	}
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			wc, err := connect(*nn)
			if err != nil {
				fail(err)
				for range jobs {
				}
				return
			}
			defer wc.Close()
			for f := range jobs {
				if failed.Load() {
					continue
				}
				t := path.Join(tmp, fmt.Sprintf("w%02d-%s", w, path.Base(f.path)))
				if err := writeFile(wc, t, f); err != nil {
					fail(err)
					continue
				}
				if err := wc.Rename(t, f.path); err != nil {
					fail(fmt.Errorf("rename %s to %s: %w", t, f.path, err))
					continue
				}
				done.Add(1)
			}
		}(w)
	}
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				fmt.Printf("gen: %d/%d files written (%.0fs)\n", done.Load(), len(todo), time.Since(start).Seconds())
			}
		}
	}()
	for _, f := range todo {
		jobs <- f
	}
	close(jobs)
	wg.Wait()
	close(stop)
	if firstErr != nil {
		return firstErr
	}
	c.RemoveAll(tmp)
	el := time.Since(start).Seconds()
	fmt.Printf("gen: wrote %d files, %d bytes in %.1fs (%.1f MB/s, %.0f files/s)\n",
		len(todo), bytes, el, float64(bytes)/1e6/el, float64(len(todo))/el)
	return nil
}

// reconcile lists the data set directories, removes whatever the layout
// does not name or that has the wrong size, and returns the files still to
// be written.
func reconcile(c *hdfs.Client, roots []string, want []fileSpec) ([]fileSpec, error) {
	have := map[string]int64{}
	var extra []string
	byPath := map[string]fileSpec{}
	for _, f := range want {
		byPath[f.path] = f
	}
	wantDir := map[string]bool{}
	for _, f := range want {
		for d := path.Dir(f.path); d != "/" && !wantDir[d]; d = path.Dir(d) {
			wantDir[d] = true
		}
	}
	for _, r := range roots {
		err := walk(c, r, func(p string, fi os.FileInfo) bool {
			if fi.IsDir() {
				if !wantDir[p] {
					extra = append(extra, p)
					return false
				}
				return true
			}
			if f, ok := byPath[p]; ok && f.size == fi.Size() {
				have[p] = fi.Size()
			} else {
				extra = append(extra, p)
			}
			return true
		})
		if err != nil && !os.IsNotExist(err) {
			return nil, fmt.Errorf("list %s: %w", r, err)
		}
	}
	for _, p := range extra {
		fmt.Printf("gen: removing %s (not part of the data set, or of the wrong size)\n", p)
		if err := c.RemoveAll(p); err != nil {
			return nil, fmt.Errorf("remove %s: %w", p, err)
		}
	}
	var todo []fileSpec
	for _, f := range want {
		if _, ok := have[f.path]; !ok {
			todo = append(todo, f)
		}
	}
	return todo, nil
}

// walk calls fn for every entry below root (not root itself), listing each
// directory with one ReadDir (so a file costs no RPC of its own); fn
// returning false for a directory skips its contents.
func walk(c *hdfs.Client, root string, fn func(p string, fi os.FileInfo) bool) error {
	ents, err := c.ReadDir(root)
	if err != nil {
		return err
	}
	for _, fi := range ents {
		p := path.Join(root, fi.Name())
		if fn(p, fi) && fi.IsDir() {
			if err := walk(c, p, fn); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFile writes f.size pseudo-random (incompressible) bytes to name.
func writeFile(c *hdfs.Client, name string, f fileSpec) error {
	defaults, err := c.ServerDefaults()
	if err != nil {
		return fmt.Errorf("server defaults: %w", err)
	}
	w, err := c.CreateFile(name, defaults.Replication, defaults.BlockSize, 0o644)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	rng := rand.NewChaCha8([32]byte{0: byte(f.seed), 1: byte(f.seed >> 8), 2: byte(f.seed >> 16), 3: byte(f.seed >> 24), 31: 'h'})
	buf := make([]byte, 1<<20)
	for left := f.size; left > 0; {
		n := int64(len(buf))
		if left < n {
			n = left
		}
		rng.Read(buf[:n])
		if _, err := w.Write(buf[:n]); err != nil {
			w.Close()
			return fmt.Errorf("write %s: %w", name, err)
		}
		left -= n
	}
	return closeRetry(w, name)
}

// closeRetry closes w, retrying while the NameNode says the last block is
// still being replicated.
func closeRetry(w *hdfs.FileWriter, name string) error {
	delay := 50 * time.Millisecond
	for i := 0; ; i++ {
		err := w.Close()
		if err == nil {
			return nil
		}
		if !hdfs.IsErrReplicating(err) || i >= 40 {
			return fmt.Errorf("close %s: %w", name, err)
		}
		time.Sleep(delay)
		if delay < time.Second {
			delay *= 2
		}
	}
}

func runRm(args []string, mkdir bool) error {
	fs := flag.NewFlagSet("rm", flag.ExitOnError)
	nn := fs.String("nn", "", "NameNode host:port")
	fs.Parse(args)
	c, err := connect(*nn)
	if err != nil {
		return err
	}
	defer c.Close()
	for _, p := range fs.Args() {
		if mkdir {
			if err := c.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("mkdir %s: %w", p, err)
			}
			continue
		}
		if err := c.RemoveAll(p); err != nil && !os.IsNotExist(err) {
			return fmt.Errorf("remove %s: %w", p, err)
		}
	}
	return nil
}

// listing maps a file's path relative to the listed root to its length and
// block size.
type listing map[string]struct{ size, block int64 }

func list(c *hdfs.Client, root string) (listing, error) {
	l := listing{}
	err := walk(c, root, func(p string, fi os.FileInfo) bool {
		if fi.IsDir() {
			return true
		}
		rel := strings.TrimPrefix(p, strings.TrimSuffix(root, "/")+"/")
		var bs int64
		if s, ok := fi.Sys().(interface{ GetBlocksize() uint64 }); ok {
			bs = int64(s.GetBlocksize())
		}
		l[rel] = struct{ size, block int64 }{fi.Size(), bs}
		return true
	})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", root, err)
	}
	return l, nil
}

func runVerify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	srcNN := fs.String("src-nn", "", "source NameNode host:port")
	srcHTTP := fs.String("src-http", "", "source WebHDFS host:port (for -crc)")
	src := fs.String("src", "", "source directory")
	dstNN := fs.String("dst-nn", "", "copy's NameNode host:port")
	dstHTTP := fs.String("dst-http", "", "copy's WebHDFS host:port (for -crc)")
	dst := fs.String("dst", "", "copy's directory")
	crc := fs.Bool("crc", true, "compare every file's COMPOSITE-CRC32C too")
	workers := fs.Int("workers", 16, "concurrent checksum requests")
	fs.Parse(args)

	sc, err := connect(*srcNN)
	if err != nil {
		return err
	}
	defer sc.Close()
	dc, err := connect(*dstNN)
	if err != nil {
		return err
	}
	defer dc.Close()
	sl, err := list(sc, *src)
	if err != nil {
		return err
	}
	dl, err := list(dc, *dst)
	if err != nil {
		return err
	}
	var (
		problems []string
		files    int
		bytes    int64
		blocks   = map[int64]int{}
		names    []string
	)
	for rel, d := range dl {
		files++
		bytes += d.size
		blocks[d.block]++
		s, ok := sl[rel]
		switch {
		case !ok:
			problems = append(problems, "extra in copy: "+rel)
		case s.size != d.size:
			problems = append(problems, fmt.Sprintf("%s: %d bytes in copy, %d at source", rel, d.size, s.size))
		default:
			names = append(names, rel)
		}
	}
	for rel := range sl {
		if _, ok := dl[rel]; !ok {
			problems = append(problems, "missing in copy: "+rel)
		}
	}
	var bl []string
	for b, n := range blocks {
		bl = append(bl, fmt.Sprintf("%d files with %d-byte blocks", n, b))
	}
	sort.Strings(bl)
	fmt.Printf("verify: copy has %d files, %d bytes (source %d files); %s\n", files, bytes, len(sl), strings.Join(bl, ", "))

	if *crc && len(problems) == 0 {
		start := time.Now()
		scrc := hdfscrc.New(*srcHTTP, user, nil)
		dcrc := hdfscrc.New(*dstHTTP, user, nil)
		jobs := make(chan string)
		var mu sync.Mutex
		var wg sync.WaitGroup
		ctx := context.Background()
		for w := 0; w < *workers; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for rel := range jobs {
					a, _, errA := scrc.FileCRC32C(ctx, path.Join(*src, rel))
					b, _, errB := dcrc.FileCRC32C(ctx, path.Join(*dst, rel))
					var p string
					switch {
					case errA != nil:
						p = fmt.Sprintf("%s: source checksum: %v", rel, errA)
					case errB != nil:
						p = fmt.Sprintf("%s: copy checksum: %v", rel, errB)
					case a != b:
						p = fmt.Sprintf("%s: COMPOSITE-CRC32C %08x in copy, %08x at source", rel, b, a)
					}
					if p != "" {
						mu.Lock()
						problems = append(problems, p)
						mu.Unlock()
					}
				}
			}()
		}
		for _, n := range names {
			jobs <- n
		}
		close(jobs)
		wg.Wait()
		if len(problems) == 0 {
			fmt.Printf("verify: all %d COMPOSITE-CRC32Cs equal (%.1fs)\n", len(names), time.Since(start).Seconds())
		}
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 10 {
			problems = append(problems[:10], fmt.Sprintf("... and %d more", len(problems)-10))
		}
		return fmt.Errorf("%s is not a complete copy of %s:\n  %s", *dst, *src, strings.Join(problems, "\n  "))
	}
	return nil
}
