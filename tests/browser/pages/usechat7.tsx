// useChat with AI SDK v7 (ai@7, @ai-sdk/react 4, installed as the aliases ai-7 / ai-sdk-react-7): the
// page itself is common_usechat.tsx.
import {
  DefaultChatTransport,
  lastAssistantMessageIsCompleteWithApprovalResponses,
  lastAssistantMessageIsCompleteWithToolCalls,
} from "ai-7";
import { useChat } from "ai-sdk-react-7";

import { mount } from "./common_usechat";

mount({ useChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses,
        lastAssistantMessageIsCompleteWithToolCalls }, "usechat7");
