package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	"cluster-init.dev/cluster-init/internal/atomicfile"
	"cluster-init.dev/cluster-init/internal/boundedfile"
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
	var out string
	keygen := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Write a new age key (mode 0600) and print its public key",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return errors.New("--out: the file to write the key to is required")
			}
			data, pub, err := secrets.GenerateKey()
			if err != nil {
				return err
			}
			f, err := os.OpenFile(out, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
			if err != nil {
				return fmt.Errorf("--out: %w", err)
			}
			if _, err := f.Write(data); err != nil {
				f.Close()
				return err
			}
			if err := f.Close(); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "public key: %s\n", pub)
			return nil
		},
	}
	keygen.Flags().StringVar(&out, "out", "", "the key file to create (refused if it exists)")

	var recipients []string
	encrypt := &cobra.Command{
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
			rel := w.Rel(path)
			data, err := boundedfile.ReadFile(path, rel, boundedfile.Values)
			if err != nil {
				return err
			}
			if secrets.IsEncrypted(data) {
				return fmt.Errorf("%s is encrypted already (for %s)", rel, strings.Join(secrets.Recipients(data), ", "))
			}
			enc, err := secrets.Encrypt(rel, data, recipients)
			if err != nil {
				return err
			}
			// Replaced whole: a failure never leaves a half-encrypted file.
			if err := atomicfile.Write(path, enc, 0o600); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: encrypted for %s\n", rel, strings.Join(recipients, ", "))
			return nil
		},
	}
	encrypt.Flags().StringArrayVar(&recipients, "age-recipient", nil, "age public key to encrypt for (repeatable; default: the recipient of --age-key-file)")
	cmd.AddCommand(keygen, encrypt)
	return cmd
}
