package main

import (
	"fmt"
	"io"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hivedr/hivedr/internal/cat"
	"github.com/hivedr/hivedr/internal/connect"
)

func runCat(args []string, stdout, stderr io.Writer) int {
	fl, cf := newFlagSet("cat", "Usage: hivedr cat [flags] TOPIC...\n\nPrint the committed records of hivedr topics as JSON lines, decoded with the\n"+
		"writer's schema from the schema registry (read only: cat registers nothing). Reads\n"+
		"from the beginning; stops at the end of the topics unless -f.", stdout, stderr)
	n := fl.Int("n", 0, "stop after this many records (0: no limit)")
	follow := fl.Bool("f", false, "keep waiting for new records instead of stopping at the end")
	conf, _, err := setup(fl, cf, args)
	if err != nil {
		return exitCode(err)
	}
	if fl.NArg() == 0 {
		fmt.Fprint(stderr, "hivedr cat: want at least one TOPIC\n\n")
		fl.Usage()
		return exitUsage
	}
	ctx, stop := signalContext()
	defer stop()
	// Read-only: cat fetches writer schemas by ID and registers nothing.
	dec, err := connect.Decoder(conf.SchemaRegistry)
	var kopts []kgo.Opt
	if err == nil {
		kopts, err = kafkaOpts(conf)
	}
	if err == nil {
		err = cat.Print(ctx, cat.Config{Brokers: conf.Kafka.Brokers, KafkaOpts: kopts, Topics: fl.Args(), Limit: *n, Follow: *follow, Decoder: dec}, stdout)
	}
	if err != nil {
		fmt.Fprintln(stderr, "hivedr cat:", connect.Explain(conf, err))
		return exitError
	}
	return exitOK
}
