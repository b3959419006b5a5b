package main

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/names"
	"cluster-init.dev/cluster-init/internal/secrets"
)

func newSecretsCommand(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Encrypt an environment's secrets with SOPS and age, so that they can be committed",
		Long: `An environment's secrets.yaml is committed encrypted with SOPS (age). The clusters decrypt it
with the age key, which bootstrap puts into them once (Secret ` + names.AgeKeySecret + `) and which is
never committed or printed. These commands do what the sops and age-keygen tools do, so that
neither needs to be installed.`,
	}
	cmd.AddCommand(newSecretsKeygenCommand(), newSecretsEncryptCommand(g))
	return cmd
}

func newSecretsKeygenCommand() *cobra.Command {
	var out string
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new age key (mode 0600) and print its public key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out: the file to write the key to is required")
			}
			pub, err := secrets.WriteNewKey(out)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "public key: %s\n", pub)
			return nil
		},
	}
	cmd.Flags().StringVar(&out, "out", "", "the key file to create (refused if it exists)")
	return cmd
}

func newSecretsEncryptCommand(g *globals) *cobra.Command {
	var recipients []string
	cmd := &cobra.Command{
		Use:   "encrypt ENV --age-recipient PUBLIC_KEY...",
		Short: "Encrypt the environment's secrets.yaml in place for these age recipients",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			w, err := g.open(args[0])
			if err != nil {
				return err
			}
			if len(recipients) == 0 {
				key, err := secrets.LoadKey(g.ageKeyFile)
				if err != nil {
					return err
				}
				if key == nil {
					return errors.New("--age-recipient: give the public key(s) to encrypt for (or --age-key-file)")
				}
				recipients = key.Recipients()
			}
			path := filepath.Join(w.Env.Dir, names.SecretsKey)
			if err := secrets.EncryptFile(path, w.Rel(path), recipients); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: encrypted for %s\n", w.Rel(path), strings.Join(recipients, ", "))
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&recipients, "age-recipient", nil, "age public key to encrypt for (repeatable; default: the recipient of --age-key-file)")
	return cmd
}
