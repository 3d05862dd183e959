package main

import (
	"flag"
	"fmt"
	"io"

	"github.com/fraudwatch/fraudwatch/config"
)

func cmdCheck(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("check", flag.ContinueOnError)
	path := fs.String("config", "", "configuration file (YAML)")
	diff := fs.String("diff", "", "a rules file to compare the configuration's rules with: what changing from it does")
	if code, ok := parse(fs, args, stderr); !ok {
		return code
	}
	cfg, ok := loadConfig("check", *path, stderr)
	if !ok {
		return exitUsage
	}
	fmt.Fprintln(stdout, cfg.Summary())
	for _, w := range append(cfg.Warnings(), config.DescriptionWarnings(cfg.RulesFile, cfg.Rules)...) {
		fmt.Fprintln(stdout, "warning: "+w)
	}
	for _, w := range cfg.FieldWarnings() {
		fmt.Fprintln(stdout, "warning: "+w.String())
	}
	fmt.Fprint(stdout, cfg.RuleTable())
	fmt.Fprint(stdout, "\n"+cfg.RouteTable())
	if *diff != "" {
		old, err := config.LoadRules(*diff)
		if err != nil {
			fmt.Fprintf(stderr, "fraudwatch check: --diff %s:\n%v\n", *diff, err)
			return exitUsage
		}
		fmt.Fprint(stdout, "\n"+config.DiffText(*diff, cfg.RulesFile, old, cfg.Rules))
	}
	return exitOK
}
