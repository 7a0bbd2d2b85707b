//! Small text statistics used by the AgentForge example task.

/// Counts the words in `text`: runs of non-whitespace separated by any whitespace.
pub fn word_count(text: &str) -> usize {
    text.split(' ').filter(|w| !w.is_empty()).count()
}

/// Mean word length in characters, or 0.0 for text without words.
pub fn mean_word_length(text: &str) -> f64 {
    let words: Vec<&str> = text.split_whitespace().collect();
    if words.is_empty() {
        return 0.0;
    }
    let total: usize = words.iter().map(|w| w.chars().count()).sum();
    total as f64 / words.len() as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_words_separated_by_spaces() {
        assert_eq!(word_count("the quick brown fox"), 4);
    }

    #[test]
    fn counts_words_across_newlines_and_tabs() {
        assert_eq!(word_count("one\ntwo\tthree  four\n"), 4);
    }

    #[test]
    fn mean_length() {
        assert_eq!(mean_word_length("ab abcd"), 3.0);
        assert_eq!(mean_word_length("   "), 0.0);
    }
}
