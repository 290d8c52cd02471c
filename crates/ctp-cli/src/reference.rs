//! What ctp says about itself to the shell and to `man`: completion scripts and the manual
//! page, both generated from the command-line definition so they cannot drift from it.

use crate::cli::Cli;
use clap::CommandFactory;
use std::io::Write;

/// Writes the completion script for `shell` to `out`.
pub fn completions(shell: clap_complete::Shell, out: &mut dyn Write) {
    clap_complete::generate(shell, &mut Cli::command(), "ctp", out);
}

/// Writes the manual page (roff): the top-level page with every subcommand's options in it.
pub fn man(out: &mut dyn Write) -> std::io::Result<()> {
    let cmd = Cli::command();
    let man = clap_mangen::Man::new(cmd.clone());
    man.render_title(out)?;
    man.render_name_section(out)?;
    man.render_synopsis_section(out)?;
    man.render_description_section(out)?;
    man.render_options_section(out)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        writeln!(out, ".SH \"ctp {}\"", sub.get_name())?;
        let page = clap_mangen::Man::new(sub.clone());
        page.render_synopsis_section(out)?;
        page.render_description_section(out)?;
        page.render_options_section(out)?;
    }
    man.render_version_section(out)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn completions_name_every_subcommand() {
        let mut out = Vec::new();
        completions(clap_complete::Shell::Bash, &mut out);
        let script = String::from_utf8(out).unwrap();
        for sub in [
            "send",
            "recv",
            "perf",
            "bench",
            "sim",
            "relay",
            "demo",
            "completions",
            "keygen",
        ] {
            assert!(script.contains(sub), "bash completion lacks {sub}");
        }
        assert!(script.contains("--profile"));
        for flag in ["--peer-key", "--allow", "--key", "--insecure", "--show"] {
            assert!(script.contains(flag), "bash completion lacks {flag}");
        }
    }

    #[test]
    fn the_man_page_documents_every_subcommand_and_its_options() {
        let mut out = Vec::new();
        man(&mut out).unwrap();
        let page = String::from_utf8(out).unwrap();
        assert!(
            page.starts_with(".ie") || page.starts_with(".TH"),
            "roff: {}",
            &page[..40]
        );
        for sub in ["send", "recv", "perf", "bench", "sim", "relay", "keygen"] {
            assert!(page.contains(&format!("ctp {sub}")), "man page lacks {sub}");
        }
        assert!(page.contains("overwrite"), "recv --overwrite is documented");
        assert!(page.contains("peer\\-key"), "send --peer-key is documented");
        assert!(
            page.contains("known_peers"),
            "first-use trust is documented"
        );
    }
}
