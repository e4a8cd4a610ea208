//! Plain text tables for the terminal and for pipes (the columns of `bfq sim`, `run`, `compare`,
//! `list` and the suite's report), laid out by comfy-table.

/// How a column's cells line up (left, right or centred).
pub use comfy_table::CellAlignment as Align;

/// Rows of cells as a plain table that reads the same on a terminal and through a pipe: no borders,
/// each column as wide as its widest cell (as a terminal shows it), two spaces between columns,
/// `indent` spaces before each line, nothing after the last cell. Column `i` is aligned as
/// `align[i]`; the last alignment given holds for the columns after it.
pub fn table(rows: impl IntoIterator<Item = Vec<String>>, align: &[Align], indent: u16) -> String {
    let mut t = comfy_table::Table::new();
    t.load_style(comfy_table::presets::NOTHING).add_rows(rows);
    for (i, column) in t.column_iter_mut().enumerate() {
        column.set_padding((if i == 0 { indent } else { 0 }, 2));
        column.set_cell_alignment(align.get(i).or(align.last()).copied().unwrap_or(Align::Left));
    }
    t.lines().map(|line| line.trim_end().to_string() + "\n").collect()
}

/// `text` as lines of at most `width` characters where its words allow (a word longer than a line
/// stays whole), broken at spaces: the first line after `first`, the others after `rest` (the
/// indents count in the width). Each line ends with a newline.
pub fn wrap(text: &str, first: &str, rest: &str, width: usize) -> String {
    let mut out = String::new();
    let mut line = first.to_string();
    let mut empty = true;
    for word in text.split(' ').filter(|w| !w.is_empty()) {
        let len = line.chars().count();
        if !empty && len + 1 + word.chars().count() > width {
            out.push_str(&line);
            out.push('\n');
            line = rest.to_string();
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    if !empty {
        out.push_str(&line);
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wrapped_text_breaks_at_spaces_within_the_width_and_keeps_long_words_whole() {
        let text = "cfq bash startup_s / bfq bash startup_s on best-of-4 in [5.375, 12.200]";
        assert_eq!(
            wrap(text, "  check: ", "    ", 40),
            "  check: cfq bash startup_s / bfq bash\n    startup_s on best-of-4 in [5.375,\n    12.200]\n"
        );
        assert!(wrap(text, "", "", 40).lines().all(|l| l.chars().count() <= 40));
        // A word longer than the line is not cut.
        assert_eq!(
            wrap("a yfq[batch_size=4,idle_wait=4ms] b", "", "  ", 10),
            "a\n  yfq[batch_size=4,idle_wait=4ms]\n  b\n"
        );
        assert_eq!(wrap("short", "> ", "  ", 100), "> short\n");
    }

    #[test]
    fn tables_align_each_column_to_its_widest_cell() {
        let rows = vec![
            vec!["scheduler".to_string(), "bfq".into(), "fifo".into()],
            vec!["read p99 (ms)".to_string(), "1166.335".into(), "86.591".into()],
            vec!["µ (x)".to_string(), "-".into(), "not done".into()],
        ];
        assert_eq!(
            table(rows.clone(), &[Align::Left, Align::Right], 0),
            "scheduler           bfq      fifo\n\
             read p99 (ms)  1166.335    86.591\n\
             µ (x)                 -  not done\n"
        );
        assert_eq!(
            table(rows, &[Align::Left], 2),
            "  scheduler      bfq       fifo\n  \
               read p99 (ms)  1166.335  86.591\n  \
               µ (x)          -         not done\n"
        );
        assert_eq!(table(Vec::new(), &[], 0), "");
    }
}
