package sink

// topicsKept returns the most topics the writer's engine keeps state
// for (producer.Writer.Topics): what the topic cap bounds.
func (w *Writer) topicsKept() int { return w.engine.Topics() }
