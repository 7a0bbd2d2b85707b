"""textstats: small statistics of a text, for the feature-list example."""


def word_count(text):
    """The number of words: runs of non-space characters."""
    raise NotImplementedError


def line_count(text):
    """The number of lines, the last one counted with or without its newline."""
    raise NotImplementedError


def top_word(text):
    """The most frequent word, lower-cased; the first seen wins a tie; None when empty."""
    raise NotImplementedError
