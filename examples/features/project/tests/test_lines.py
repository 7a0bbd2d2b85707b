import unittest

from textstats import line_count


class LineCount(unittest.TestCase):
    def test_trailing_newline(self):
        self.assertEqual(line_count("a\nb\n"), 2)

    def test_no_trailing_newline(self):
        self.assertEqual(line_count("a\nb"), 2)

    def test_empty(self):
        self.assertEqual(line_count(""), 0)


if __name__ == "__main__":
    unittest.main()
