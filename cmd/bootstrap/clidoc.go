package main

import (
	"bytes"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"

	"cluster-init.dev/cluster-init/internal/atomicfile"
)

// newCLIDocCommand writes docs/cli.md from the commands themselves with cobra's generator; lint
// (ci/lint.sh) runs it into a scratch file and fails when the committed page differs.
func newCLIDocCommand() *cobra.Command {
	return &cobra.Command{
		Use:    "gen-cli-doc FILE",
		Short:  "Write the reference of every command and flag as one Markdown page (docs/cli.md)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			page, err := cliDoc(newRootCommand())
			if err != nil {
				return err
			}
			return atomicfile.Write(args[0], page, 0o644)
		},
	}
}

// cliDoc is the Markdown of root and every command under it that a user can run (hidden ones, run
// inside the clusters, are left out), one section each, linked by anchors.
func cliDoc(root *cobra.Command) ([]byte, error) {
	var out bytes.Buffer
	out.WriteString("# Command reference\n\nGenerated from the commands by `bootstrap gen-cli-doc docs/cli.md` (cobra's\ngenerator); `ci/lint.sh` fails when it is not current. Edit the commands, not this page.\n\n")
	var walk func(c *cobra.Command) error
	walk = func(c *cobra.Command) error {
		if !c.IsAvailableCommand() && c != root {
			return nil
		}
		c.DisableAutoGenTag = true
		var section bytes.Buffer
		if err := doc.GenMarkdownCustom(c, &section, anchor); err != nil {
			return fmt.Errorf("document %s: %w", c.CommandPath(), err)
		}
		out.Write(section.Bytes())
		out.WriteString("\n")
		for _, sub := range c.Commands() {
			if err := walk(sub); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(root); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

// anchor turns the file name cobra links a command by (bootstrap_upgrade_plan.md) into the
// anchor of its section on the one page (#bootstrap-upgrade-plan).
func anchor(file string) string {
	return "#" + strings.ReplaceAll(strings.TrimSuffix(file, ".md"), "_", "-")
}
