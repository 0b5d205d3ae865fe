//! XML text, written once for every XML parlab writes: the escape (SVG figures, JUnit files)
//! and the opening of an SVG figure.

/// Escapes text for an XML element or a double-quoted attribute; the control characters
/// XML 1.0 forbids become spaces.
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if (c as u32) < 0x20 && !matches!(c, '\n' | '\t' | '\r') => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Opens an SVG figure of `width` × `height` pixels on a white background, its text in
/// `font_size` px sans-serif (two lines, each ending in a newline).
pub fn svg_open(width: f64, height: f64, font_size: u32) -> String {
    format!(
        "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{width}\" height=\"{height}\" viewBox=\"0 0 {width} {height}\" \
         font-family=\"sans-serif\" font-size=\"{font_size}\">\n<rect width=\"{width}\" height=\"{height}\" fill=\"white\"/>\n"
    )
}

#[cfg(test)]
mod tests {
    use super::{escape, svg_open};

    #[test]
    fn escapes_markup_and_drops_forbidden_control_characters() {
        assert_eq!(escape("a<b & \"c\">d\u{1}e\nf"), "a&lt;b &amp; &quot;c&quot;&gt;d e\nf");
        assert_eq!(escape("parlab's"), "parlab's", "apostrophes need no escape in double-quoted attributes");
    }

    #[test]
    fn an_svg_opens_with_its_size_and_a_white_background() {
        let s = svg_open(680.0, 420.0, 12);
        assert!(s.starts_with("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"680\" height=\"420\" viewBox=\"0 0 680 420\""), "{s}");
        assert!(s.ends_with("<rect width=\"680\" height=\"420\" fill=\"white\"/>\n"), "{s}");
    }
}
