import unittest

from textstats import word_count


class WordCount(unittest.TestCase):
    def test_words(self):
        self.assertEqual(word_count("the quick  brown\tfox\n"), 4)

    def test_empty(self):
        self.assertEqual(word_count("   "), 0)


if __name__ == "__main__":
    unittest.main()
