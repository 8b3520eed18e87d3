//! Tables printed by the command line: comfy-table with one look everywhere — Markdown
//! pipes, so that a result pastes into a README as it is — and numbers right-aligned.

use comfy_table::{CellAlignment, Table, presets};

/// A table with these column headers; every column after the first (the row's name) is
/// right-aligned.
///
/// ```
/// let mut t = sandgym::table::new(&["row", "success"]);
/// t.add_row(vec!["trained".to_owned(), format!("{:.3}", 0.616)]);
/// assert_eq!(
///     t.to_string(),
///     "| row     | success |\n|---------|---------|\n| trained |   0.616 |"
/// );
/// ```
pub fn new(header: &[&str]) -> Table {
    let mut table = Table::new();
    table
        .load_style(presets::ASCII_MARKDOWN)
        .set_header(header.to_vec());
    for i in 1..header.len() {
        if let Some(column) = table.column_mut(i) {
            column.set_cell_alignment(CellAlignment::Right);
        }
    }
    table
}
