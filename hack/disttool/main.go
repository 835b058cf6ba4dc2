// Command disttool is hack/dist.sh's helper: it packs release archives reproducibly,
// renders the krew manifest with their sha256s and checks the result by krew's rules.
//
//	disttool pack ARCHIVE DIR
//	disttool render -template krew/litepool.yaml -version V -dir OUT [-partial] -o OUT/litepool.yaml
//	disttool verify -manifest OUT/litepool.yaml -dir OUT [-all-platforms]
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/runwhere-ai/litepool/krew"
)

func main() {
	if len(os.Args) < 2 {
		fail(fmt.Errorf("usage: disttool pack|render|verify ARGS"))
	}
	var err error
	switch os.Args[1] {
	case "pack":
		if len(os.Args) != 4 {
			fail(fmt.Errorf("usage: disttool pack ARCHIVE DIR"))
		}
		err = krew.Pack(os.Args[2], os.Args[3])
	case "render":
		err = render(os.Args[2:])
	case "verify":
		err = verify(os.Args[2:])
	default:
		err = fmt.Errorf("unknown subcommand %q: use pack, render or verify", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "disttool:", err)
	os.Exit(1)
}

func render(args []string) error {
	fs := flag.NewFlagSet("render", flag.ExitOnError)
	template := fs.String("template", "krew/litepool.yaml", "manifest template")
	version := fs.String("version", "", "release version (vX.Y.Z)")
	dir := fs.String("dir", "", "directory holding the archives")
	partial := fs.Bool("partial", false, "leave out platforms whose archive was not built")
	out := fs.String("o", "", "rendered manifest")
	_ = fs.Parse(args)
	text, err := os.ReadFile(*template)
	if err != nil {
		return err
	}
	r, err := krew.Render(text, *version, *dir, *partial)
	if err != nil {
		return err
	}
	if len(r.Omitted) > 0 {
		fmt.Fprintf(os.Stderr, "disttool: not built, left out of the manifest: %v\n", r.Omitted)
	}
	return os.WriteFile(*out, r.Manifest, 0o644)
}

func verify(args []string) error {
	fs := flag.NewFlagSet("verify", flag.ExitOnError)
	manifest := fs.String("manifest", "", "rendered manifest")
	dir := fs.String("dir", "", "directory holding the archives")
	all := fs.Bool("all-platforms", false, "require every release platform")
	_ = fs.Parse(args)
	p, err := krew.ValidateFile(*manifest)
	if err != nil {
		return err
	}
	if *all {
		if err := krew.RequirePlatforms(p, krew.ReleasePlatforms); err != nil {
			return err
		}
	}
	if w := krew.Lint(p); len(w) > 0 {
		return fmt.Errorf("%s: %s", *manifest, strings.Join(w, "; "))
	}
	if err := krew.VerifyArchives(p, *dir, krew.CompletionScripts); err != nil {
		return err
	}
	fmt.Printf("%s: valid for krew; %d archive(s) match their sha256 and carry the plugin, %s and the completion script\n",
		filepath.Base(*manifest), len(p.Spec.Platforms), krew.License)
	return nil
}
