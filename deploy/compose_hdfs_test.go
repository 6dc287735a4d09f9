package deploy

import (
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// minHDFSSettings is the fewest site settings hdfsDrift must read from
// hdfs.sh for one cluster (21 today): fewer means the script changed how
// it writes them and the check would silently check nothing.
const minHDFSSettings = 18

// composeHDFSDir is where compose's HDFS containers keep what the stack
// keeps in $STACK_DIR/hdfs-<cluster> ($dir in hdfs.sh).
const composeHDFSDir = "/hdfs"

// composeMatchesHDFS checks compose's HDFS clusters against hdfs.sh: the
// image from the stack's pom, each cluster's NameNode and DataNode in
// services of their own (the stack's daemons nn-<c> and dn-<c>) sharing
// the cluster's conf directory, the daemons' classes, JVM flags, heaps,
// cluster ID and logging, every setting the stack writes to core-site.xml
// and hdfs-site.xml (hdfsDrift), and the DataNode's ports published.
func composeMatchesHDFS(t *testing.T, spec composeSpec, lib map[string]string) {
	t.Helper()
	hdfsSh := string(readFile(t, "../e2e/stack/services/hdfs.sh"))
	dockerHDFS := string(readFile(t, "../compose/Dockerfile.hdfs"))
	entry := string(readFile(t, "../compose/hdfs/entrypoint.sh"))
	for _, want := range []string{"COPY e2e/stack/hdfs/pom.xml", "COPY compose/hdfs/entrypoint.sh", "compose/hdfs/log4j.properties", "compose/hdfs/jul.properties"} {
		if !strings.Contains(dockerHDFS, want) {
			t.Errorf("Dockerfile.hdfs lacks %q", want)
		}
	}

	// The daemons: the stack's classes, heaps and cluster ID, every flag
	// of _hdfs_java, and its logging configuration.
	classes := regexp.MustCompile(`_hdfs_java "\$c" "\$(HDFS_[ND]N_HEAP)" (org\.apache\.[\w.]+)`).FindAllStringSubmatch(hdfsSh, -1)
	if len(classes) < 3 { // the NameNode's format, the NameNode, the DataNode
		t.Fatalf("read %d daemon command lines from hdfs.sh's _hdfs_java calls", len(classes))
	}
	stackVars := regexp.MustCompile(`(?m)^(HDFS_\w+)=(?:\$\{\w+:-)?([\w.-]+)\}?$`).FindAllStringSubmatch(hdfsSh, -1)
	if len(stackVars) < 3 {
		t.Errorf("read %d of HDFS_NN_HEAP, HDFS_DN_HEAP, HDFS_CLUSTER_ID from hdfs.sh", len(stackVars))
	}
	for _, m := range stackVars {
		if !regexp.MustCompile(`(?m)^` + m[1] + `=(\$\{` + m[1] + `:-)?` + regexp.QuoteMeta(m[2]) + `\}?$`).MatchString(entry) {
			t.Errorf("compose/hdfs/entrypoint.sh does not set %s to the stack's %s", m[1], m[2])
		}
	}
	for _, m := range classes {
		if !regexp.MustCompile(`hdfs_java "\$` + m[1] + `" ` + regexp.QuoteMeta(m[2]) + `(\s|$)`).MatchString(entry) {
			t.Errorf("compose/hdfs/entrypoint.sh does not run %s with $%s as hdfs.sh does", m[2], m[1])
		}
	}
	if !strings.Contains(hdfsSh, `-format -clusterid "$HDFS_CLUSTER_ID" -force -nonInteractive`) ||
		!strings.Contains(entry, `-format -clusterid "$HDFS_CLUSTER_ID" -force -nonInteractive`) {
		t.Error("the NameNode is not formatted as hdfs.sh formats it")
	}
	javaBody := regexp.MustCompile(`(?s)\n_hdfs_java\(\) \{(.*?)\n\}`).FindStringSubmatch(hdfsSh)
	if javaBody == nil {
		t.Fatal("hdfs.sh has no _hdfs_java")
	}
	// The command line printf prints (the secured variant's krb5.conf flag,
	// set before it, is not compose's).
	_, cmdline, ok := strings.Cut(javaBody[1], "printf ")
	if !ok {
		t.Fatal("hdfs.sh's _hdfs_java prints no command line")
	}
	flags := 0
	for _, f := range strings.Fields(cmdline) {
		f = strings.Trim(f, `"\`)
		if !strings.HasPrefix(f, "-") {
			continue
		}
		// A flag with a stack path: its name, up to the variable, is given.
		want, _, _ := strings.Cut(f, "$")
		flags++
		if !strings.Contains(entry, want) {
			t.Errorf("compose/hdfs/entrypoint.sh lacks hdfs.sh's JVM flag %s", want)
		}
	}
	if flags < 9 {
		t.Errorf("read %d JVM flags from hdfs.sh's _hdfs_java", flags)
	}
	logconf := regexp.MustCompile(`(?s)<<'EOF'\n(.*?)\nEOF`).FindStringSubmatch(hdfsSh)
	if logconf == nil {
		t.Fatal("hdfs.sh writes no log4j.properties heredoc")
	}
	if a, b := propLines(logconf[1]), propLines(string(readFile(t, "../compose/hdfs/log4j.properties"))); len(a) < 5 || !slices.Equal(a, b) {
		t.Errorf("compose/hdfs/log4j.properties:\n%s\nwant hdfs.sh's:\n%s", strings.Join(b, "\n"), strings.Join(a, "\n"))
	}
	if jul := regexp.MustCompile(`echo '([^']+)' >"\$STACK_DIR/hdfs/jul.properties"`).FindStringSubmatch(hdfsSh); jul == nil ||
		strings.TrimSpace(string(readFile(t, "../compose/hdfs/jul.properties"))) != jul[1] {
		t.Errorf("compose/hdfs/jul.properties is not hdfs.sh's %v", jul)
	}

	// Each cluster: the two services, their conf, their settings.
	stack := stackHDFSProps(hdfsSh)
	for _, c := range []string{"src", "dr"} {
		vars, err := hdfsClusterVars(hdfsSh, lib, c)
		if err != nil {
			t.Fatal(err)
		}
		nnSvc, dnSvc := "hdfs-"+c, "hdfs-"+c+"-dn"
		conf := "./conf/hdfs-" + c + ":/etc/hadoop:ro"
		for svc, cmd := range map[string]string{nnSvc: "namenode", dnSvc: "datanode"} {
			s := spec.Services[svc]
			if s.Build.Dockerfile != "compose/Dockerfile.hdfs" || s.Build.Context != ".." || !slices.Equal(s.Command, []string{cmd}) ||
				!slices.Contains(s.Volumes, conf) || s.Hostname != svc {
				t.Errorf("%s: build %+v command %v volumes %v hostname %q; want Dockerfile.hdfs running %s with %s, hostname %s",
					svc, s.Build, s.Command, s.Volumes, s.Hostname, cmd, conf, svc)
			}
		}
		for _, p := range []string{vars["dnx"], vars["dnh"], vars["dni"]} {
			if want := "127.0.0.1:" + p + ":" + p; !slices.Contains(spec.Services[dnSvc].Ports, want) {
				t.Errorf("%s: ports %v, want %s (hdfs.sh's DataNode ports)", dnSvc, spec.Services[dnSvc].Ports, want)
			}
		}
		got := map[string]map[string]string{}
		for file := range stack {
			got[file] = xmlProps(string(readFile(t, "../compose/conf/hdfs-"+c+"/"+file)))
		}
		checked, problems := hdfsDrift(stack, vars, got)
		for _, p := range problems {
			t.Errorf("compose/conf/hdfs-%s: %s", c, p)
		}
		t.Logf("hdfs-%s: %d settings of hdfs.sh checked", c, checked)
		// Where the pattern allows any host, the names that matter.
		core, site := got["core-site.xml"], got["hdfs-site.xml"]
		nn := nnSvc + ":" + vars["nn"]
		if core["fs.defaultFS"] != "hdfs://"+nn || site["dfs.namenode.rpc-address"] != nn || site["dfs.namenode.http-address"] != nnSvc+":"+vars["http"] ||
			site["dfs.datanode.hostname"] != dnSvc {
			t.Errorf("hdfs-%s: fs.defaultFS %q, rpc %q, http %q, datanode hostname %q; want the services %s and %s",
				c, core["fs.defaultFS"], site["dfs.namenode.rpc-address"], site["dfs.namenode.http-address"], site["dfs.datanode.hostname"], nnSvc, dnSvc)
		}
		if m := regexp.MustCompile(`HIVEDR_HDFS_` + strings.ToUpper(c) + `_BLOCKSIZE=(\d+)`).FindStringSubmatch(hdfsSh); m == nil || site["dfs.blocksize"] != m[1] {
			t.Errorf("hdfs-%s: dfs.blocksize %q, want the block size hdfs.sh tells the tests (%v)", c, site["dfs.blocksize"], m)
		}
	}
}

// propLines are the non-blank, non-comment lines of a properties file.
func propLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}

// stackHDFSProps are the settings hdfs.sh's _hdfs_write_conf writes, per
// file (core-site.xml, hdfs-site.xml): each `_hdfs_prop NAME VALUE` line of
// the file's { ... } >"$dir/conf/FILE" block, the value unquoted. The
// secured variant's settings (_hdfs_secure_*) are not compose's: it
// mirrors the plain stack.
func stackHDFSProps(hdfsSh string) map[string][][2]string {
	out := map[string][][2]string{}
	body := regexp.MustCompile(`(?s)\n_hdfs_write_conf\(\) \{\n(.*?)\n\}\n`).FindStringSubmatch(hdfsSh)
	if body == nil {
		return out
	}
	line := regexp.MustCompile(`(?m)^\s*_hdfs_prop (\S+) (.+?)\s*$`)
	for _, b := range regexp.MustCompile(`(?s)\{\n(.*?)\n\s*\} >"\$dir/conf/([\w.-]+)"`).FindAllStringSubmatch(body[1], -1) {
		for _, m := range line.FindAllStringSubmatch(b[1], -1) {
			v := m[2]
			if len(v) >= 2 && (v[0] == '"' || v[0] == '\'') && v[len(v)-1] == v[0] {
				v = v[1 : len(v)-1]
			}
			out[b[2]] = append(out[b[2]], [2]string{m[1], v})
		}
	}
	return out
}

// hdfsClusterVars are the shell variables of cluster c (src or dr) that
// hdfs.sh's site settings use, as compose has them: _hdfs_conf's nn, http,
// bs, dnx, dnh and dni (the ports of lib.sh, and $((N + PORT_OFFSET)) as
// N), and dir, compose's composeHDFSDir.
func hdfsClusterVars(hdfsSh string, lib map[string]string, c string) (map[string]string, error) {
	m := regexp.MustCompile(`(?s)\n\s*` + c + `\) (.*?);;`).FindStringSubmatch(hdfsSh)
	if m == nil {
		return nil, fmt.Errorf("hdfs.sh's _hdfs_conf has no case %s", c)
	}
	vars := map[string]string{"dir": composeHDFSDir}
	for _, a := range regexp.MustCompile(`(\w+)=(\$\(\((\d+) \+ PORT_OFFSET\)\)|\$(\w+)|(\S+))`).FindAllStringSubmatch(m[1], -1) {
		switch {
		case a[3] != "":
			vars[a[1]] = a[3]
		case a[4] != "":
			v, ok := lib[a[4]]
			if !ok {
				return nil, fmt.Errorf("hdfs.sh's _hdfs_conf %s: %s=$%s is not a port of lib.sh", c, a[1], a[4])
			}
			vars[a[1]] = v
		default:
			vars[a[1]] = a[5]
		}
	}
	for _, k := range []string{"nn", "http", "bs", "dnx", "dnh", "dni"} {
		if vars[k] == "" {
			return nil, fmt.Errorf("hdfs.sh's _hdfs_conf %s sets no %s (read %v)", c, k, vars)
		}
	}
	return vars, nil
}

// hdfsDrift compares the stack's settings (stackHDFSProps) with compose's
// site files of one cluster (got: file -> name -> value) and returns how
// many it checked and what differs. A literal value must be equal; a
// value with variables must match it expanded with vars ($HOST standing
// for any host: compose names services, or 0.0.0.0 to listen on all of a
// container's addresses). A variable vars lacks, or fewer than
// minHDFSSettings settings read, is a problem too: the check must not
// silently check less than the stack sets.
func hdfsDrift(stack map[string][][2]string, vars map[string]string, got map[string]map[string]string) (int, []string) {
	var problems []string
	checked := 0
	ref := regexp.MustCompile(`\$\{?(\w+)\}?`)
	for _, file := range slices.Sorted(maps.Keys(stack)) {
		for _, p := range stack[file] {
			name, v := p[0], p[1]
			checked++
			have, ok := got[file][name]
			if !ok {
				problems = append(problems, fmt.Sprintf("%s lacks %s (hdfs.sh sets %s)", file, name, v))
				continue
			}
			if !strings.Contains(v, "$") {
				if have != v {
					problems = append(problems, fmt.Sprintf("%s: %s=%q, want %q as hdfs.sh sets it", file, name, have, v))
				}
				continue
			}
			var pat strings.Builder
			last := 0
			for _, loc := range ref.FindAllStringSubmatchIndex(v, -1) {
				pat.WriteString(regexp.QuoteMeta(v[last:loc[0]]))
				last = loc[1]
				switch x := v[loc[2]:loc[3]]; {
				case x == "HOST":
					pat.WriteString(`[A-Za-z0-9.-]+`)
				case vars[x] != "":
					pat.WriteString(regexp.QuoteMeta(vars[x]))
				default:
					problems = append(problems, fmt.Sprintf("%s: %s=%s uses $%s, which this check cannot resolve", file, name, v, x))
				}
			}
			pat.WriteString(regexp.QuoteMeta(v[last:]))
			if !regexp.MustCompile(`^` + pat.String() + `$`).MatchString(have) {
				problems = append(problems, fmt.Sprintf("%s: %s=%q, want hdfs.sh's %s (%s)", file, name, have, v, pat.String()))
			}
		}
	}
	if checked < minHDFSSettings {
		problems = append(problems, fmt.Sprintf("read %d settings from hdfs.sh's _hdfs_write_conf (_hdfs_prop lines), want at least %d", checked, minHDFSSettings))
	}
	return checked, problems
}

// TestComposeHDFSDriftCaught: hdfsDrift, which TestComposeMatchesStack
// trusts, passes the real files and finds each kind of drift in mutated
// copies of them: a setting missing from compose, a literal changed, a
// new stack setting, a port of the wrong cluster, a variable it cannot
// resolve, and a script whose settings it can no longer read.
func TestComposeHDFSDriftCaught(t *testing.T) {
	hdfsSh := string(readFile(t, "../e2e/stack/services/hdfs.sh"))
	lib := shellVars(string(readFile(t, "../e2e/stack/lib.sh")))
	vars, err := hdfsClusterVars(hdfsSh, lib, "src")
	if err != nil {
		t.Fatal(err)
	}
	compose := func(edit func(map[string]map[string]string)) map[string]map[string]string {
		got := map[string]map[string]string{}
		for _, f := range []string{"core-site.xml", "hdfs-site.xml"} {
			got[f] = xmlProps(string(readFile(t, "../compose/conf/hdfs-src/"+f)))
		}
		if edit != nil {
			edit(got)
		}
		return got
	}
	siteLine := "    _hdfs_prop dfs.blockreport.initialDelay 0\n"
	if !strings.Contains(hdfsSh, siteLine) {
		t.Fatalf("hdfs.sh has no line %q to mutate around", siteLine)
	}
	cases := []struct {
		name    string
		stackSh string
		got     map[string]map[string]string
		want    string // a problem hdfsDrift must report; "" for none
	}{
		{"the real files", hdfsSh, compose(nil), ""},
		{"a setting missing from compose", hdfsSh, compose(func(g map[string]map[string]string) { delete(g["hdfs-site.xml"], "dfs.heartbeat.interval") }),
			"hdfs-site.xml lacks dfs.heartbeat.interval"},
		{"a literal changed in compose", hdfsSh, compose(func(g map[string]map[string]string) { g["hdfs-site.xml"]["dfs.replication"] = "3" }),
			`dfs.replication="3", want "1"`},
		{"a setting in core-site.xml only in hdfs-site.xml", hdfsSh, compose(func(g map[string]map[string]string) {
			g["hdfs-site.xml"]["hadoop.tmp.dir"] = g["core-site.xml"]["hadoop.tmp.dir"]
			delete(g["core-site.xml"], "hadoop.tmp.dir")
		}), "core-site.xml lacks hadoop.tmp.dir"},
		{"the DR block size", hdfsSh, compose(func(g map[string]map[string]string) { g["hdfs-site.xml"]["dfs.blocksize"] = "4194304" }),
			`dfs.blocksize="4194304"`},
		{"a DataNode port of the other cluster", hdfsSh, compose(func(g map[string]map[string]string) { g["hdfs-site.xml"]["dfs.datanode.address"] = "0.0.0.0:28010" }),
			`dfs.datanode.address="0.0.0.0:28010"`},
		{"a new setting in the stack", strings.Replace(hdfsSh, siteLine, siteLine+"    _hdfs_prop dfs.namenode.handler.count 4\n", 1), compose(nil),
			"hdfs-site.xml lacks dfs.namenode.handler.count"},
		{"a quoted value changed in the stack", strings.Replace(hdfsSh, `_hdfs_prop dfs.namenode.secondary.http-address "$HOST:0"`,
			`_hdfs_prop dfs.namenode.secondary.http-address "$HOST:50090"`, 1), compose(nil), "dfs.namenode.secondary.http-address"},
		{"a variable the check cannot resolve", strings.Replace(hdfsSh, siteLine, siteLine+"    _hdfs_prop dfs.namenode.handler.count \"$handlers\"\n", 1),
			compose(func(g map[string]map[string]string) { g["hdfs-site.xml"]["dfs.namenode.handler.count"] = "4" }), "uses $handlers"},
		{"settings written some other way", strings.ReplaceAll(hdfsSh, "_hdfs_prop ", "_hdfs_setting "), compose(nil), "read 0 settings"},
	}
	for _, c := range cases {
		checked, problems := hdfsDrift(stackHDFSProps(c.stackSh), vars, c.got)
		switch {
		case c.want == "" && (len(problems) > 0 || checked < minHDFSSettings):
			t.Errorf("%s: %d checked, problems %q; want none", c.name, checked, problems)
		case c.want != "" && !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, c.want) }):
			t.Errorf("%s: problems %q, want one saying %q", c.name, problems, c.want)
		}
	}
}
