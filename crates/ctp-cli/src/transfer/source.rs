//! The sender's side of a manifest: the files and directories named on the command line,
//! walked recursively into [`Entry`]s that point back to where each is read from.
//!
//! A path named on the command line is followed if it is a symbolic link (as `cp` does);
//! a symbolic link met while walking a directory is skipped with a warning, and so is
//! anything that is neither a regular file nor a directory (sockets, FIFOs, devices). Names
//! must be UTF-8 (the manifest carries UTF-8): another name is an error, not a silent gap.

use super::manifest::{check_path, Entry, Kind, Manifest, Mtime, MAX_ENTRIES};
use std::collections::HashSet;
use std::fs::Metadata;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// What the sender offers: the manifest, where each of its entries is read from, and what
/// was left out.
#[derive(Debug, Default)]
pub struct Sources {
    /// The manifest the receiver gets.
    pub manifest: Manifest,
    /// The local path of each manifest entry, in the same order.
    pub paths: Vec<PathBuf>,
    /// One line for each thing skipped (symbolic links, special files).
    pub warnings: Vec<String>,
}

impl Sources {
    /// The local paths of the files, in wire order.
    pub fn file_paths(&self) -> impl Iterator<Item = (&Entry, &Path)> {
        self.manifest
            .entries
            .iter()
            .zip(&self.paths)
            .filter(|(e, _)| e.kind == Kind::File)
            .map(|(e, p)| (e, p.as_path()))
    }
}

/// Walks `roots` (files or directories, recursively) into [`Sources`]. Each root keeps its
/// own name at the top of the manifest, as `scp -r` does; two roots with the same name are
/// an error. The reason says what is wrong.
pub fn collect(roots: &[PathBuf]) -> Result<Sources, String> {
    let mut out = Sources::default();
    let mut names = HashSet::new();
    for root in roots {
        let meta =
            std::fs::metadata(root).map_err(|e| format!("cannot read {}: {e}", root.display()))?;
        let name = root_name(root)?;
        if !names.insert(name.clone()) {
            return Err(format!(
                "two sources are named {name}: they would land on the same path"
            ));
        }
        if meta.is_file() {
            push(&mut out, name, root.clone(), &meta, Kind::File)?;
        } else if meta.is_dir() {
            walk(&mut out, root, name, &meta)?;
        } else {
            return Err(format!(
                "{} is neither a regular file nor a directory",
                root.display()
            ));
        }
    }
    Ok(out)
}

/// The name `root` gets at the top of the manifest: its last component (that of its
/// canonical form for `.`, `..` or `/`).
fn root_name(root: &Path) -> Result<String, String> {
    let canonical;
    let name = match root.file_name() {
        Some(n) => n,
        None => {
            canonical = std::fs::canonicalize(root)
                .map_err(|e| format!("cannot read {}: {e}", root.display()))?;
            canonical
                .file_name()
                .ok_or_else(|| format!("{} has no name to send it under", root.display()))?
        }
    };
    let name = name
        .to_str()
        .ok_or_else(|| format!("the name of {} is not valid UTF-8", root.display()))?;
    check_path(name).map_err(|e| format!("{}: {e}", root.display()))?;
    Ok(name.to_string())
}

/// Adds the directory `dir` (named `rel` in the manifest) and everything under it, parents
/// before children, each directory's entries sorted by name.
fn walk(out: &mut Sources, dir: &Path, rel: String, meta: &Metadata) -> Result<(), String> {
    let mut stack = vec![(dir.to_path_buf(), rel, meta.clone())];
    while let Some((dir, rel, meta)) = stack.pop() {
        push(out, rel.clone(), dir.clone(), &meta, Kind::Dir)?;
        let mut children: Vec<_> = std::fs::read_dir(&dir)
            .and_then(|it| it.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("cannot list {}: {e}", dir.display()))?;
        children.sort_by_key(|c| c.file_name());
        let mut subdirs = Vec::new();
        for child in children {
            let path = child.path();
            let name = child.file_name();
            let name = name
                .to_str()
                .ok_or_else(|| format!("the name of {} is not valid UTF-8", path.display()))?;
            let rel = format!("{rel}/{name}");
            let meta = std::fs::symlink_metadata(&path)
                .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
            let ft = meta.file_type();
            if ft.is_symlink() {
                out.warnings
                    .push(format!("skipping symbolic link {}", path.display()));
            } else if ft.is_dir() {
                subdirs.push((path, rel, meta));
            } else if ft.is_file() {
                push(out, rel, path, &meta, Kind::File)?;
            } else {
                out.warnings.push(format!(
                    "skipping {}: not a regular file or directory",
                    path.display()
                ));
            }
        }
        // Popped in name order: the stack takes them reversed.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
}

/// Appends one entry read from `path`.
fn push(
    out: &mut Sources,
    rel: String,
    path: PathBuf,
    meta: &Metadata,
    kind: Kind,
) -> Result<(), String> {
    if out.manifest.entries.len() as u64 >= u64::from(MAX_ENTRIES) {
        return Err(format!(
            "more than {MAX_ENTRIES} files and directories: send them in several transfers"
        ));
    }
    check_path(&rel).map_err(|e| format!("{}: {e}", path.display()))?;
    out.manifest.entries.push(Entry {
        path: rel,
        kind,
        size: if kind == Kind::File { meta.len() } else { 0 },
        mode: meta.permissions().mode() & 0o7777,
        mtime: meta.modified().map(Mtime::from_system).unwrap_or_default(),
    });
    out.paths.push(path);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_walked_parents_first_links_skipped_and_names_checked() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("tree");
        std::fs::create_dir_all(root.join("b/empty")).unwrap();
        std::fs::write(root.join("a.txt"), b"12345").unwrap();
        std::fs::write(root.join("b/c.bin"), b"x").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", root.join("link")).unwrap();
        let single = dir.path().join("single.txt");
        std::fs::write(&single, b"s").unwrap();
        let s = collect(&[root.clone(), single.clone()]).unwrap();
        let listed: Vec<_> = s
            .manifest
            .entries
            .iter()
            .map(|e| (e.path.as_str(), e.kind, e.size))
            .collect();
        assert_eq!(
            listed,
            [
                ("tree", Kind::Dir, 0),
                ("tree/a.txt", Kind::File, 5),
                ("tree/b", Kind::Dir, 0),
                ("tree/b/c.bin", Kind::File, 1),
                ("tree/b/empty", Kind::Dir, 0),
                ("single.txt", Kind::File, 1),
            ]
        );
        assert_eq!(s.paths[1], root.join("a.txt"));
        assert_eq!(s.warnings.len(), 1);
        assert!(s.warnings[0].contains("symbolic link"), "{:?}", s.warnings);
        assert!(s.manifest.check().is_ok());
        let e = collect(&[single.clone(), single]).unwrap_err();
        assert!(e.contains("two sources"), "{e}");
        assert!(collect(&[dir.path().join("absent")])
            .unwrap_err()
            .contains("cannot read"));
    }
}
