# The "Word embeddings: encoding lexical semantics" tutorial: an N-gram language model
# (Embedding of the context words, view(1, -1), Linear, ReLU, log_softmax, NLLLoss, SGD),
# trained word by word on the sonnet's first lines, then the learned embedding read back.
import torch
import torch.nn as nn
import torch.nn.functional as F
import torch.optim as optim

CONTEXT_SIZE = 2
EMBEDDING_DIM = 4
test_sentence = """When forty winters shall besiege thy brow,
And dig deep trenches in thy beauty's field,
Thy youth's proud livery so gazed on now,""".split()
ngrams = [([test_sentence[i - j - 1] for j in range(CONTEXT_SIZE)], test_sentence[i])
          for i in range(CONTEXT_SIZE, len(test_sentence))]
vocab = sorted(set(test_sentence))
word_to_ix = {word: i for i, word in enumerate(vocab)}


class NGramLanguageModeler(nn.Module):
    def __init__(self, vocab_size, embedding_dim, context_size):
        super().__init__()
        self.embeddings = nn.Embedding(vocab_size, embedding_dim)
        self.linear1 = nn.Linear(context_size * embedding_dim, 16)
        self.linear2 = nn.Linear(16, vocab_size)

    def forward(self, inputs):
        embeds = self.embeddings(inputs).view((1, -1))
        out = F.relu(self.linear1(embeds))
        out = self.linear2(out)
        return F.log_softmax(out, dim=1)


losses = []
loss_function = nn.NLLLoss()
torch.manual_seed(1)
model = NGramLanguageModeler(len(vocab), EMBEDDING_DIM, CONTEXT_SIZE)
with torch.no_grad():
    for k, p in enumerate(model.parameters()):
        p.copy_(torch.linspace(-0.3, 0.3, p.numel()).reshape(p.shape).cos() * (1 - 0.2 * k))
optimizer = optim.SGD(model.parameters(), lr=0.01)
for epoch in range(2):
    total_loss = 0
    for context, target in ngrams:
        context_idxs = torch.tensor([word_to_ix[w] for w in context], dtype=torch.long)
        model.zero_grad()
        log_probs = model(context_idxs)
        loss = loss_function(log_probs, torch.tensor([word_to_ix[target]], dtype=torch.long))
        loss.backward()
        optimizer.step()
        total_loss += loss.item()
    losses.append(total_loss)
RESULTS = {"losses": losses, "beauty": model.embeddings.weight[word_to_ix["beauty's"]].tolist(),
           "vocab": len(vocab)}
