package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/cli"
	"github.com/hivedr/hivedr/internal/config"
	"github.com/hivedr/hivedr/internal/connect"
	"github.com/hivedr/hivedr/internal/kafka"
)

// runACLs is `hivedr acls`: the Kafka ACLs each role needs under the
// configuration's names (kafka.RoleACLs), printed as a table, and created
// with -apply by the configured Kafka user (an admin).
func runACLs(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("acls", "Usage: hivedr acls [flags]\n\n"+
		"Print the Kafka ACLs each role needs, and nothing more, under this configuration's topic\n"+
		"prefix, groups and transactional IDs: the tailer, copyd, the applier, operator (status,\n"+
		"verify, cat, replay, bootstrap, failover, failback, drill) and viewer (status, verify, cat and\n"+
		"group lag, read-only: no offset commits, no requests). With -apply, create them as the\n"+
		"configured Kafka user, who must be allowed to (a super user); existing ACLs stay as they are.\n"+
		"-timeout bounds -apply.", stdout, stderr)
	var roleList cli.List
	fl.Var(&roleList, "role", "only these roles ("+roleNames(", ")+"); repeatable, or comma-separated; default all")
	var principals principalFlags
	fl.Var(&principals, "principal", "the principal of a role, ROLE=User:NAME (repeatable); default User:<role>")
	apply := fl.Bool("apply", false, "create the ACLs in the cluster (kafka section required)")
	timeout := timeoutFlag(fl, time.Minute)
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() > 0 {
		fmt.Fprintf(stderr, "hivedr acls: unexpected arguments %q\n", fl.Args())
		return exitUsage
	}
	roles := kafka.Roles
	if len(roleList) > 0 {
		roles = nil
		for _, r := range roleList {
			role := kafka.Role(r)
			if !slices.Contains(kafka.Roles, role) {
				fmt.Fprintf(stderr, "hivedr acls: -role: %q is not %s\n", r, roleNames(" or "))
				return exitUsage
			}
			roles = append(roles, role)
		}
	}
	who := map[kafka.Role]string{}
	for _, r := range kafka.Roles {
		who[r] = "User:" + string(r)
	}
	for r, p := range principals {
		if !slices.Contains(kafka.Roles, r) {
			fmt.Fprintf(stderr, "hivedr acls: -principal: %q is not %s\n", r, roleNames(" or "))
			return exitUsage
		}
		who[r] = p
	}
	var acls []kafka.ACL
	for _, r := range roles {
		acls = append(acls, kafka.RoleACLs(r, aclNames(conf))...)
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ROLE\tPRINCIPAL\tRESOURCE\tPATTERN\tNAME\tOPERATIONS\tWHY")
	for _, a := range acls {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", a.Role, who[a.Role], a.Resource, a.Pattern, a.Name, a.Ops(), a.Why)
	}
	if err := tw.Flush(); err != nil {
		return exitError
	}
	if !*apply {
		return exitOK
	}
	if err := conf.Require("hivedr acls -apply", config.SectionKafka); err != nil {
		fmt.Fprintf(stderr, "hivedr acls: %v\n", err)
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	n, err := createACLs(ctx, conf, who, acls)
	if err != nil {
		fmt.Fprintf(stderr, "hivedr acls: %v\n", connect.Explain(conf, err))
		return exitError
	}
	fmt.Fprintf(stderr, "hivedr acls: %d ACL entries in place (%d rules) on %s (%s)\n", n, len(acls),
		strings.Join(conf.Kafka.Brokers, ","), conf.Kafka.Security())
	return exitOK
}

// roleNames lists the roles, the last joined to the others by last:
// "tailer, copyd, applier, operator or viewer".
func roleNames(last string) string {
	names := make([]string, len(kafka.Roles))
	for i, r := range kafka.Roles {
		names[i] = string(r)
	}
	n := len(names) - 1
	return strings.Join(names[:n], ", ") + last + names[n]
}

// createACLs creates acls in conf's cluster as conf's Kafka user.
func createACLs(ctx context.Context, conf *config.Config, who map[kafka.Role]string, acls []kafka.ACL) (int, error) {
	kopts, err := kafkaOpts(conf)
	if err != nil {
		return 0, err
	}
	cl, err := kgo.NewClient(kopts...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	return kafka.CreateACLs(ctx, kadm.NewClient(cl), who, acls)
}

// aclNames are the names conf's ACLs are about.
func aclNames(conf *config.Config) kafka.Names {
	return kafka.Names{Topics: kafka.Topics{Prefix: conf.Kafka.TopicPrefix, Site: conf.TopicSite()}, TailerTransactionalID: conf.Tailer.TransactionalID,
		CopydGroup: conf.Copyd.Group, ApplierGroup: conf.Applier.Group, CDC: conf.Tailer.CDC.Enabled}
}

// principalFlags are -principal ROLE=User:NAME flags.
type principalFlags map[kafka.Role]string

func (p *principalFlags) String() string { return fmt.Sprint(map[kafka.Role]string(*p)) }

func (p *principalFlags) Set(v string) error {
	role, principal, ok := strings.Cut(v, "=")
	if !ok || !strings.Contains(principal, ":") {
		return fmt.Errorf("%q is not ROLE=User:NAME", v)
	}
	if *p == nil {
		*p = principalFlags{}
	}
	(*p)[kafka.Role(role)] = principal
	return nil
}
