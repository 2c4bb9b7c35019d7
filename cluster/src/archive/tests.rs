use std::fs;
use std::os::unix::fs::PermissionsExt;

use super::*;

fn tree(root: &Path) {
    fs::create_dir_all(root.join("notes/deep")).unwrap();
    fs::write(root.join("AGENTS.md"), "be brief").unwrap();
    fs::write(root.join("notes/deep/a.txt"), vec![7u8; 300_000]).unwrap();
    fs::write(root.join("run.sh"), "echo hi").unwrap();
    fs::set_permissions(root.join("run.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    fs::create_dir(root.join("empty")).unwrap();
}

#[test]
fn a_workspace_comes_back_as_it_was_and_its_manifest_agrees() {
    let d = tempfile::tempdir().unwrap();
    let (src, dst) = (d.path().join("src/ws"), d.path().join("dst/ws"));
    tree(&src);
    std::os::unix::fs::symlink("/etc/passwd", src.join("link")).unwrap();
    let packed = pack(&src, 1 << 20).unwrap();
    assert_eq!(packed.manifest, manifest(&src).unwrap());
    assert_eq!(packed.manifest.files, 3);
    assert_eq!(packed.manifest.skipped, 1, "the symlink does not travel");
    // Over a workspace that has other files: they are gone after.
    fs::create_dir_all(&dst).unwrap();
    fs::write(dst.join("stale.txt"), "old").unwrap();
    let restored = restore(&dst, &packed.archive, 1 << 20).unwrap();
    assert_eq!(restored.digest, packed.manifest.digest);
    assert!(!dst.join("stale.txt").exists());
    assert!(!dst.join("link").exists());
    assert_eq!(
        fs::read(dst.join("notes/deep/a.txt")).unwrap().len(),
        300_000
    );
    let mode = fs::metadata(dst.join("run.sh"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o755);
    assert!(dst.join("empty").is_dir());
    // Nothing left beside it.
    let litter: Vec<_> = fs::read_dir(d.path().join("dst")).unwrap().collect();
    assert_eq!(litter.len(), 1);
}

#[test]
fn a_changed_file_changes_the_manifest() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    tree(&ws);
    let before = manifest(&ws).unwrap();
    assert_eq!(before, manifest(&ws).unwrap());
    fs::write(ws.join("AGENTS.md"), "be brief!").unwrap();
    assert_ne!(before.digest, manifest(&ws).unwrap().digest);
    assert_eq!(manifest(&d.path().join("absent")).unwrap().files, 0);
}

#[test]
fn past_the_cap_nothing_is_packed_or_restored() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("ws");
    tree(&ws);
    assert!(matches!(
        pack(&ws, 1000),
        Err(ArchiveError::TooLarge { cap: 1000, .. })
    ));
    let packed = pack(&ws, 1 << 20).unwrap();
    let dst = d.path().join("dst");
    fs::create_dir_all(&dst).unwrap();
    fs::write(dst.join("kept"), "x").unwrap();
    assert!(matches!(
        restore(&dst, &packed.archive, 1000),
        Err(ArchiveError::TooLarge { .. })
    ));
    assert!(
        dst.join("kept").exists(),
        "a refused restore leaves the workspace"
    );
}

/// An archive of one file at `path` (as hostile input would write it).
fn one_file(path: &[u8]) -> Vec<u8> {
    let mut a = MAGIC.to_vec();
    a.push(b'f');
    a.extend_from_slice(&0o644u32.to_le_bytes());
    a.extend_from_slice(&0i64.to_le_bytes());
    a.extend_from_slice(&0u32.to_le_bytes());
    a.extend_from_slice(&(path.len() as u32).to_le_bytes());
    a.extend_from_slice(path);
    a.extend_from_slice(&2u64.to_le_bytes());
    a.extend_from_slice(b"hi");
    a.push(b'e');
    a
}

#[test]
fn a_hostile_archive_writes_nothing_outside_and_leaves_the_workspace() {
    let d = tempfile::tempdir().unwrap();
    let ws = d.path().join("box/ws");
    fs::create_dir_all(&ws).unwrap();
    fs::write(ws.join("kept"), "x").unwrap();
    for bad in [
        &b"../escape"[..],
        b"/etc/escape",
        b"a/../../escape",
        b"./a",
        b"a//b",
        b"",
        b"a\0b",
    ] {
        let err = restore(&ws, &one_file(bad), 1 << 20).unwrap_err();
        assert!(matches!(err, ArchiveError::Corrupt(_)), "{bad:?}: {err}");
        assert!(ws.join("kept").exists());
    }
    assert!(!d.path().join("escape").exists());
    assert!(!d.path().join("box/escape").exists());
    // Truncated, trailing bytes, a lying size, no magic.
    let good = one_file(b"a");
    for bad in [
        good[..good.len() - 1].to_vec(),
        [good.clone(), b"x".to_vec()].concat(),
        b"nope".to_vec(),
        {
            let mut lie = good.clone();
            let at = MAGIC.len() + 1 + 4 + 8 + 4 + 4 + 1;
            lie[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
            lie
        },
    ] {
        assert!(restore(&ws, &bad, 1 << 20).is_err());
        assert!(ws.join("kept").exists());
    }
    restore(&ws, &good, 1 << 20).unwrap();
    assert_eq!(fs::read(ws.join("a")).unwrap(), b"hi");
    assert!(!ws.join("kept").exists());
}
