import unittest

from textstats import top_word


class TopWord(unittest.TestCase):
    def test_most_frequent(self):
        self.assertEqual(top_word("b a B c a b"), "b")

    def test_tie_first_seen(self):
        self.assertEqual(top_word("x y"), "x")

    def test_empty(self):
        self.assertIsNone(top_word(""))


if __name__ == "__main__":
    unittest.main()
