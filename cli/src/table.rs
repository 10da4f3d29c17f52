//! An aligned text table whose cells may carry a style. Widths are measured
//! on the plain text; styles are escape codes around it, which anstream
//! strips when the output is not a terminal (or NO_COLOR is set).

use anstyle::Style;
use unicode_width::UnicodeWidthStr;

use crate::text::shown;

/// One cell: its text and style.
pub struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    /// A cell without style.
    pub fn plain(text: &str) -> Cell {
        Cell::styled(text, Style::new())
    }

    /// A cell in `style`. Control characters are escaped and very long
    /// text is cut (see [`shown`]): cells hold server-given names.
    pub fn styled(text: &str, style: Style) -> Cell {
        Cell {
            text: shown(text).into_owned(),
            style,
        }
    }
}

/// Renders `header` and `rows` with columns two spaces apart; the last
/// column is not padded. Every line ends in a newline.
pub fn render(header: &[&str], rows: &[Vec<Cell>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|title| title.width()).collect();
    for row in rows {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.text.width());
        }
    }
    let bold = Style::new().bold();
    let mut out = String::new();
    let header: Vec<Cell> = header
        .iter()
        .map(|title| Cell::styled(title, bold))
        .collect();
    for row in std::iter::once(&header).chain(rows) {
        for (index, cell) in row.iter().enumerate().take(columns) {
            out.push_str(&format!(
                "{}{}{}",
                cell.style.render(),
                cell.text,
                cell.style.render_reset()
            ));
            if index + 1 < columns {
                let pad = widths[index] - cell.text.width() + 2;
                out.extend(std::iter::repeat_n(' ', pad));
            }
        }
        out.push('\n');
    }
    out
}
