//! Every `BILSTM_*` name a kernel source or header uses is one of
//! `bilstm_core::geometry::defines()`: no geometry is written twice.

use bilstm_kernels::{HEADERS, sources};

/// Every maximal `BILSTM_[A-Z0-9_]+` token of `text`.
fn bilstm_names(text: &str) -> Vec<String> {
    let bytes = text.as_bytes();
    let mut names = Vec::new();
    let mut i = 0;
    while let Some(found) = text[i..].find("BILSTM_") {
        let start = i + found;
        let preceded_by_word =
            start > 0 && (bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start + "BILSTM_".len();
        while end < bytes.len()
            && (bytes[end].is_ascii_uppercase()
                || bytes[end].is_ascii_digit()
                || bytes[end] == b'_')
        {
            end += 1;
        }
        if !preceded_by_word && end > start + "BILSTM_".len() {
            names.push(text[start..end].to_string());
        }
        i = end;
    }
    names
}

#[test]
fn every_bilstm_name_is_a_geometry_define() {
    let defines = bilstm_core::geometry::defines();
    let mut files: Vec<(&str, &str)> = sources().to_vec();
    files.extend(HEADERS.iter().map(|h| (h.name, h.source)));
    let mut checked = 0;
    for (file, text) in files {
        for name in bilstm_names(text) {
            assert!(
                defines.iter().any(|(d, _)| *d == name),
                "{file} uses {name}, which defines() lacks"
            );
            checked += 1;
        }
    }
    assert!(checked > 50, "the scan found only {checked} names");
}

#[test]
fn the_scanner_finds_whole_tokens() {
    assert_eq!(
        bilstm_names("a BILSTM_HIDDEN*BILSTM_K_PAD2 xBILSTM_NO BILSTM_ `BILSTM_`"),
        ["BILSTM_HIDDEN", "BILSTM_K_PAD2"]
    );
}
